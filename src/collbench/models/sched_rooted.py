"""What bcast, gather and scatter algorithms send, and the tree and linear patterns reduce
shares with them (see models/schedules.py)."""

from __future__ import annotations

from collbench.models.steps import Builder, Params
from collbench.models.trees import (
    parents,
    seg_count,
    segments,
    tree_binomial,
    tree_chain,
    tree_in_order_binomial,
    tree_kary,
    tree_knomial,
)

# ---------------------------------------------------------------------------------------
# generic tree algorithms


def _bcast_tree(b: Builder, children: list[list[int]], root: int, segs: list[int]) -> None:
    par = parents(children)
    for r in range(b.p):
        kids = children[r]
        if r == root:
            for s in segs:
                b.step(r, sends=[(c, s) for c in kids])
        elif kids:
            b.recv(r, par[r])
            for j in range(1, len(segs)):
                b.step(r, sends=[(c, segs[j - 1]) for c in kids], recvs=[(par[r], False)])
            b.step(r, sends=[(c, segs[-1]) for c in kids])
        else:
            for _ in segs:
                b.recv(r, par[r])


def _reduce_tree(b: Builder, children: list[list[int]], root: int, segs: list[int]) -> None:
    par = parents(children)
    for r in range(b.p):
        kids = children[r]
        up = r != root
        if not kids:
            if up:  # blocking sends, one segment after another
                for s in segs:
                    b.send(r, par[r], s)
            continue
        # Open MPI's reduce_generic: per segment and child, post the next receive, then
        # wait for the previous one (two in flight); once the last child of segment j-1
        # is in, reduce it and send it up.
        waiting: int | None = None
        for j in range(len(segs) + 1):
            for i, c in enumerate(kids):
                ahead = [c] if j < len(segs) else []
                b.step(r, recvs=[(waiting, True)] if waiting is not None else [],
                       posts=ahead)
                waiting = c if ahead else None
                if i == 0 and j > 0:
                    if up:
                        b.send(r, par[r], segs[j - 1])
                    if j == len(segs):
                        break


def _linear_bcast(b: Builder, root: int, nbytes: int) -> None:
    b.step(root, sends=[(i, nbytes) for i in range(b.p) if i != root])
    for i in range(b.p):
        if i != root:
            b.recv(i, root)


def _linear_reduce(b: Builder, root: int, nbytes: int) -> None:
    p = b.p
    for i in range(p):
        if i != root:
            b.send(i, root, nbytes)
    if root != p - 1:
        b.recv(root, p - 1)
    for i in range(p - 2, -1, -1):
        if i == root:
            b.step(root, compute=nbytes)
        else:
            b.recv(root, i, reduce=True)


# ---------------------------------------------------------------------------------------
# bcast


def _bcast(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, root, dt = b.p, pr.root, pr.dtype_size
    count = nbytes // dt
    segs = segments(count, seg_count(pr.segsize, dt, count), dt)
    if alg == "basic_linear":
        _linear_bcast(b, root, count * dt)
    elif alg == "chain":
        _bcast_tree(b, tree_chain(p, pr.fanout, root), root, segs)
    elif alg == "pipeline":
        _bcast_tree(b, tree_chain(p, 1, root), root, segs)
    elif alg == "binary_tree":
        _bcast_tree(b, tree_kary(p, 2, root), root, segs)
    elif alg == "binomial":
        _bcast_tree(b, tree_binomial(p, root), root, segs)
    elif alg == "knomial":
        _bcast_tree(b, tree_knomial(p, root, max(2, pr.radix)), root, segs)
    elif alg == "split_binary_tree":
        _bcast_split_bintree(b, count, pr)
    elif alg in ("scatter_allgather", "scatter_allgather_ring"):
        if count < p:
            _linear_bcast(b, root, count * dt)
        else:
            _bcast_scatter_allgather(b, count, pr, ring=alg.endswith("ring"))


def _bcast_split_bintree(b: Builder, count: int, pr: Params) -> None:
    p, root, dt, seg = b.p, pr.root, pr.dtype_size, pr.segsize
    halves = [-(-count // 2), count // 2]
    if halves[0] == 0 or halves[1] == 0 or seg > halves[0] * dt or seg > halves[1] * dt:
        # Open MPI falls back to the chain with fanout 1 (a pipeline), same segment size
        _bcast_tree(b, tree_chain(p, 1, root), root,
                    segments(count, seg_count(seg, dt, count), dt))
        return
    per = max(seg // dt, 1) if seg > 0 else 0
    hsegs = [segments(h, per if per else h, dt) for h in halves]
    kids = tree_kary(p, 2, root)
    par = parents(kids)
    for r in range(p):
        s = (r - root) % p
        if r == root:
            for j in range(len(hsegs[0])):
                for i, c in enumerate(kids[r][:2]):
                    if j < len(hsegs[i]):
                        b.send(r, c, hsegs[i][j])
            continue
        lr = (s + 1) % 2
        mine = hsegs[lr]
        if kids[r]:  # segment j arrives while segment j-1 goes to the children
            b.recv(r, par[r])
            for j in range(1, len(mine)):
                b.step(r, sends=[(c, mine[j - 1]) for c in kids[r]], recvs=[(par[r], False)])
            b.step(r, sends=[(c, mine[-1]) for c in kids[r]])
        else:
            for _ in mine:
                b.recv(r, par[r])
    # exchange of halves between the two subtrees
    for r in range(p):
        s = (r - root) % p
        lr = (s + 1) % 2
        pair = (r + 1) % p if lr == 0 else (r - 1 + p) % p
        if p % 2 == 1:
            if r != root:
                b.sendrecv(r, pair, halves[lr] * dt, pair)
        elif r == root:
            b.send(r, (root + p - 1) % p, halves[1] * dt)
        elif s == p - 1:
            b.recv(r, root)
        else:
            b.sendrecv(r, pair, halves[lr] * dt, pair)


def _bcast_scatter_allgather(b: Builder, count: int, pr: Params, ring: bool) -> None:
    p, root, dt = b.p, pr.root, pr.dtype_size
    sc = -(-count // p)

    def real(v: int) -> int:
        return (v + root) % p

    # binomial scatter: each vrank forwards to vrank + mask the part beyond that child
    got = {0: count}
    for v in range(p):
        curr = got.get(v, 0)
        if v:
            low = v & -v
            if v in got:
                b.recv(real(v), real(v - low))
            mask = low >> 1
        else:
            mask = 1
            while mask < p:
                mask <<= 1
            mask >>= 1
        while mask > 0:
            if v + mask < p:
                n = curr - sc * mask
                if n > 0:
                    b.send(real(v), real(v + mask), n * dt)
                    got[v + mask] = n
                    curr -= n
            mask >>= 1
    have = [max(min(sc, count - v * sc), 0) for v in range(p)]
    if ring:
        for v in range(p):
            send_block, recv_block = v, (v - 1) % p
            for _ in range(1, p):
                n = max(min(sc, count - send_block * sc), 0)
                b.sendrecv(real(v), real((v + 1) % p), n * dt, real((v - 1) % p))
                send_block, recv_block = recv_block, (recv_block - 1) % p
        return
    # recursive doubling allgather; ranks whose partner subtree is incomplete get the
    # missing part forwarded by recursive halving inside their subtree
    held = list(have)
    rc = [0] * p  # the amount last received, which is what a rank forwards
    mask = 1
    while mask < p:
        got_now = {v: held[v ^ mask] for v in range(p) if v ^ mask < p}
        for v in got_now:
            b.sendrecv(real(v), real(v ^ mask), held[v] * dt, real(v ^ mask))
        for v, n in got_now.items():
            rc[v] = n
            held[v] += n
        rh = mask >> 1
        while rh > 0:
            moved: dict[int, int] = {}
            for v in range(p):
                vtree = v & ~(mask - 1)
                if ((v ^ mask) & ~(mask - 1)) + mask <= p:
                    continue
                alldata = p - vtree - mask
                w = v ^ rh
                troot = v & ~((rh << 1) - 1)
                if w > v and v < troot + alldata <= w:
                    b.send(real(v), real(w), rc[v] * dt)
                    moved[w] = rc[v]
                elif w < v and w < troot + alldata <= v:
                    b.recv(real(v), real(w))
            for w, n in moved.items():
                rc[w] = n
                held[w] += n
            rh >>= 1
        mask <<= 1


# ---------------------------------------------------------------------------------------
# gather / scatter


def _gather(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, root, dt = b.p, pr.root, pr.dtype_size
    m = nbytes // dt * dt
    if alg == "basic_linear":
        for i in range(p):
            if i != root:
                b.send(i, root, m)
                b.recv(root, i)
    elif alg == "binomial":
        kids = tree_in_order_binomial(p, root)
        par = parents(kids)
        for r in range(p):
            v = (r - root) % p
            total = 1
            for c in kids[r]:
                vc = (c - root) % p
                b.recv(r, c)
                total += min(vc - v, p - vc)
            if r != root:
                b.send(r, par[r], total * m)
    elif alg == "linear_sync":
        count = nbytes // dt
        first = seg_count(pr.segsize, dt, count)
        for i in range(p):
            if i == root:
                continue
            b.recv(i, root)
            b.send(i, root, first * dt)
            b.send(i, root, (count - first) * dt)
            # irecv the first part, "go", irecv the rest; wait for the first part
            b.step(root, sends=[(i, 0)], posts=[i, i])
            b.recv(root, i)
        b.step(root, recvs=[(i, False) for i in range(p) if i != root])


def _scatter(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, root, dt = b.p, pr.root, pr.dtype_size
    m = nbytes // dt * dt
    if alg == "basic_linear":
        for i in range(p):
            if i != root:
                b.send(root, i, m)
                b.recv(i, root)
    elif alg == "linear_nb":
        # isends (a blocking send every max_requests); they share the send port either way
        b.step(root, sends=[(i, m) for i in range(p) if i != root])
        for i in range(p):
            if i != root:
                b.recv(i, root)
    elif alg == "binomial":
        kids = tree_in_order_binomial(p, root)
        par = parents(kids)
        for r in range(p):
            v = (r - root) % p
            if r != root:
                b.recv(r, par[r])
            for c in reversed(kids[r]):
                vc = (c - root) % p
                b.send(r, c, min(vc - v, p - vc) * m)
