"""What reduce, allreduce, allgather, alltoall and barrier algorithms send (see
models/schedules.py)."""

from __future__ import annotations

from collbench.models.sched_rooted import (
    _bcast,
    _gather,
    _linear_bcast,
    _linear_reduce,
    _reduce_tree,
)
from collbench.models.steps import DEFAULT_INNER, Builder, Params, check, need_two
from collbench.models.trees import (
    block_counts,
    seg_count,
    segments,
    tree_chain,
    tree_in_order_binary,
    tree_in_order_binomial,
    tree_kary,
)

# ---------------------------------------------------------------------------------------
# reduce / allreduce


def _reduce(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, root, dt = b.p, pr.root, pr.dtype_size
    count = nbytes // dt
    segs = segments(count, seg_count(pr.segsize, dt, count), dt)
    if alg == "linear":
        _linear_reduce(b, root, count * dt)
    elif alg == "chain":
        _reduce_tree(b, tree_chain(p, pr.fanout, root), root, segs)
    elif alg == "pipeline":
        _reduce_tree(b, tree_chain(p, 1, root), root, segs)
    elif alg == "binary":
        _reduce_tree(b, tree_kary(p, 2, root), root, segs)
    elif alg == "binomial":
        _reduce_tree(b, tree_in_order_binomial(p, root), root, segs)
    elif alg == "in-order_binary":
        _reduce_tree(b, tree_in_order_binary(p), p - 1, segs)
        if root != p - 1:
            b.send(p - 1, root, count * dt)
            b.recv(root, p - 1)
    elif alg == "rabenseifner":
        pof2 = 1 << (p.bit_length() - 1)
        if pof2 < 2 or count < pof2:
            _linear_reduce(b, root, count * dt)
        else:
            _rabenseifner(b, count, dt, root=root)


def _rabenseifner(b: Builder, count: int, dt: int, root: int | None) -> None:
    """Reduce-scatter by recursive halving, then recursive-doubling allgather (root None)
    or binomial gather to root, with Open MPI's pre/post steps for P not a power of 2."""
    p = b.p
    steps = p.bit_length() - 1
    pof2 = 1 << steps
    rem = p - pof2
    lh = count // 2
    rh = count - lh
    vrank = [0] * p
    for r in range(p):
        if r < 2 * rem:
            if r % 2:
                b.sendrecv(r, r - 1, lh * dt, r - 1, reduce=True)
                b.send(r, r - 1, rh * dt)
                vrank[r] = -1
            else:
                b.sendrecv(r, r + 1, rh * dt, r + 1, reduce=True)
                b.recv(r, r + 1)
                vrank[r] = r // 2
        else:
            vrank[r] = r - rem

    def real(v: int) -> int:
        return v * 2 if v < rem else v + rem

    counts: dict[int, tuple[list[int], list[int]]] = {}
    for r in range(p):
        v = vrank[r]
        if v < 0:
            continue
        sc, rc, w = [], [], count
        mask = 1
        while mask < pof2:
            dest = real(v ^ mask)
            half = w // 2
            if r < dest:
                rc.append(half)
                sc.append(w - half)
            else:
                sc.append(half)
                rc.append(w - half)
            b.sendrecv(r, dest, sc[-1] * dt, dest, reduce=True)
            w = rc[-1]
            mask <<= 1
        counts[r] = (sc, rc)
    if root is None:  # allgather by recursive doubling, then the excluded ranks
        for r in range(p):
            v = vrank[r]
            if v < 0:
                continue
            sc, rc = counts[r]
            mask, step = pof2 >> 1, steps - 1
            while mask > 0:
                dest = real(v ^ mask)
                b.sendrecv(r, dest, rc[step] * dt, dest)
                mask >>= 1
                step -= 1
        for r in range(min(2 * rem, p)):
            if r % 2:
                b.recv(r, r - 1)
            else:
                b.send(r, r + 1, count * dt)
        return
    # binomial gather of the blocks to root
    vroot = root // 2 if root < 2 * rem else root - rem
    odd_root = root < 2 * rem and root % 2 == 1
    if odd_root:
        vroot = 0  # rank 0 hands its block to the root and leaves
        b.recv(root, 0)
        b.send(0, root, counts[0][1][steps - 1] * dt)
    for r in range(p):
        v = vrank[r]
        if v < 0 or (odd_root and r == 0):
            continue
        sc, rc = counts[r]
        mask, step = pof2 >> 1, steps - 1
        while mask > 0:
            vdest = v ^ mask
            dest = real(vdest)
            if vdest == 0 and odd_root:
                dest = root
            if (vdest >> step) == (vroot >> step):
                b.send(r, dest, rc[step] * dt)
                break
            b.recv(r, dest)
            mask >>= 1
            step -= 1


def _allreduce(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, dt = b.p, pr.dtype_size
    count = nbytes // dt
    m = count * dt
    if alg == "basic_linear":
        _linear_reduce(b, 0, m)
        _linear_bcast(b, 0, m)
    elif alg == "nonoverlapping":
        inner_r = pr.inner.get("reduce", DEFAULT_INNER["reduce"])
        inner_b = pr.inner.get("bcast", DEFAULT_INNER["bcast"])
        check(inner_r, "reduce", "inner reduce")
        check(inner_b, "bcast", "inner bcast")
        sub = Params(pr.segsize, pr.fanout, pr.radix, dt, 0, pr.max_requests, pr.inner)
        _reduce(b, inner_r, m, sub)
        _bcast(b, inner_b, m, sub)
    elif alg == "recursive_doubling":
        _allreduce_recdbl(b, m)
    elif alg == "ring":
        if count < p:
            _allreduce_recdbl(b, m)
        else:
            _allreduce_ring(b, count, dt, 1)
    elif alg == "segmented_ring":
        segc = seg_count(pr.segsize, dt, count)
        if count < p * segc:
            if count < p:
                _allreduce_recdbl(b, m)
            else:
                _allreduce_ring(b, count, dt, 1)
        else:
            phases = count // (p * segc)
            extra = count % (p * segc)
            if extra >= p and extra > p * segc // 2:
                phases += 1
            _allreduce_ring(b, count, dt, phases)
    elif alg == "rabenseifner":
        pof2 = 1 << (p.bit_length() - 1)
        if count < pof2:
            _linear_reduce(b, 0, m)
            _linear_bcast(b, 0, m)
        else:
            _rabenseifner(b, count, dt, root=None)


def _allreduce_recdbl(b: Builder, m: int) -> None:
    p = b.p
    adj = 1 << (p.bit_length() - 1)
    extra = p - adj
    for r in range(p):
        if r < 2 * extra:
            if r % 2 == 0:
                b.send(r, r + 1, m)
                continue
            b.recv(r, r - 1, reduce=True)
            nr = r >> 1
        else:
            nr = r - extra
        dist = 1
        while dist < adj:
            nrem = nr ^ dist
            remote = nrem * 2 + 1 if nrem < extra else nrem + extra
            b.sendrecv(r, remote, m, remote, reduce=True)
            dist <<= 1
    for r in range(min(2 * extra, p)):
        if r % 2 == 0:
            b.recv(r, r + 1)
        else:
            b.send(r, r - 1, m)


def _allreduce_ring(b: Builder, count: int, dt: int, phases: int) -> None:
    p = b.p
    blocks = block_counts(count, p)
    parts = [block_counts(bc, phases) for bc in blocks]
    for r in range(p):
        right, left = (r + 1) % p, (r - 1) % p
        for ph in range(phases):
            # reduce-scatter, as Open MPI's ring: irecv, send my block; then per step
            # irecv the next, wait for the previous, reduce it and send it on (blocking)
            b.step(r, sends=[(right, parts[r][ph] * dt)], posts=[left])
            for k in range(2, p):
                prev = (r - k + 1) % p
                b.step(r, recvs=[(left, True)], posts=[left])
                b.send(r, right, parts[prev][ph] * dt)
            b.recv(r, left, reduce=True)
        for k in range(p - 1):
            blk = (r + 1 - k) % p
            b.sendrecv(r, right, blocks[blk] * dt, left)


# ---------------------------------------------------------------------------------------
# allgather / alltoall / barrier


def _allgather(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, dt = b.p, pr.dtype_size
    m = nbytes // dt * dt
    if alg == "recursive_doubling" and p & (p - 1):
        alg = "bruck"
    if alg == "neighbor" and p % 2:
        alg = "ring"
    if alg == "linear":
        inner_g = pr.inner.get("gather", DEFAULT_INNER["gather"])
        inner_b = pr.inner.get("bcast", DEFAULT_INNER["bcast"])
        check(inner_g, "gather", "inner gather")
        check(inner_b, "bcast", "inner bcast")
        sub = Params(pr.segsize, pr.fanout, pr.radix, dt, 0, pr.max_requests, pr.inner)
        _gather(b, inner_g, m, sub)
        _bcast(b, inner_b, m * p, sub)
    elif alg == "bruck":
        d = 1
        while d < p:
            n = d if d <= p >> 1 else p - d
            for r in range(p):
                b.sendrecv(r, (r - d) % p, n * m, (r + d) % p)
            d <<= 1
    elif alg == "recursive_doubling":
        d = 1
        while d < p:
            for r in range(p):
                b.sendrecv(r, r ^ d, d * m, r ^ d)
            d <<= 1
    elif alg == "ring":
        for r in range(p):
            for _ in range(p - 1):
                b.sendrecv(r, (r + 1) % p, m, (r - 1) % p)
    elif alg == "neighbor":
        for r in range(p):
            nb = [(r + 1) % p, (r - 1) % p] if r % 2 == 0 else [(r - 1) % p, (r + 1) % p]
            b.sendrecv(r, nb[0], m, nb[0])
            for i in range(1, p // 2):
                b.sendrecv(r, nb[i % 2], 2 * m, nb[i % 2])
    elif alg == "two_proc":
        need_two(p, "allgather", alg)
        for r in range(2):
            b.sendrecv(r, r ^ 1, m, r ^ 1)
    elif alg == "sparbit":
        log = max((p - 1).bit_length(), 0)
        dist = 1 << (log - 1) if log else 0
        last = (p & -p).bit_length() - 1
        ignore = ((~(p >> last) & 0xFFFFFFFF) | 1) << last & 0xFFFFFFFF
        expected = 1
        for _ in range(log):
            excl = 1 if (dist & ignore) == dist else 0
            n = expected - excl
            for r in range(p):
                to, frm = (r + dist) % p, (r - dist) % p
                b.step(r, sends=[(to, m)] * n, recvs=[(frm, False)] * n)
            dist >>= 1
            expected = (expected << 1) - excl


def _alltoall(b: Builder, alg: str, nbytes: int, pr: Params) -> None:
    p, dt = b.p, pr.dtype_size
    m = nbytes // dt * dt
    if alg == "linear" or (alg == "linear_sync" and (pr.max_requests <= 0
                                                     or pr.max_requests >= p - 1)):
        for r in range(p):
            b.step(r, sends=[((r - k) % p, m) for k in range(1, p)],
                   recvs=[((r + k) % p, False) for k in range(1, p)])
    elif alg == "linear_sync":
        w = pr.max_requests  # a window of w receives and w sends, refilled as they finish
        for r in range(p):
            for lo in range(1, p, w):
                ks = range(lo, min(lo + w, p))
                b.step(r, sends=[((r - k) % p, m) for k in ks],
                       recvs=[((r + k) % p, False) for k in ks])
    elif alg == "pairwise":
        for r in range(p):
            for k in range(1, p):
                b.sendrecv(r, (r + k) % p, m, (r - k) % p)
    elif alg == "modified_bruck":
        d = 1
        while d < p:
            nblocks = sum(min(d, p - i) for i in range(d, p, 2 * d))
            for r in range(p):
                b.sendrecv(r, (r + d) % p, nblocks * m, (r - d) % p)
            d <<= 1
    elif alg == "two_proc":
        need_two(p, "alltoall", alg)
        for r in range(2):
            b.sendrecv(r, r ^ 1, m, r ^ 1)


def _barrier(b: Builder, alg: str, pr: Params) -> None:
    p = b.p
    if alg == "linear":
        for i in range(1, p):
            b.send(i, 0, 0)
            b.recv(i, 0)
        b.step(0, recvs=[(i, False) for i in range(1, p)])
        for i in range(1, p):
            b.send(0, i, 0)
    elif alg == "double_ring":
        for r in range(p):
            left, right = (r - 1) % p, (r + 1) % p
            for ring in range(2):  # the second round with synchronous sends
                if r > 0:
                    b.recv(r, left)
                    b.send(r, right, 0, sync=ring == 1)
                else:
                    b.send(r, right, 0, sync=ring == 1)
                    b.recv(r, left)
    elif alg == "recursive_doubling":
        adj = 1 << (p.bit_length() - 1)
        for r in range(p):
            if r >= adj:
                b.sendrecv(r, r - adj, 0, r - adj)
                continue
            if r < p - adj:
                b.recv(r, r + adj)
            mask = 1
            while mask < adj:
                b.sendrecv(r, r ^ mask, 0, r ^ mask)
                mask <<= 1
            if r < p - adj:  # the release is a synchronous send
                b.send(r, r + adj, 0, sync=True)
    elif alg == "bruck":
        d = 1
        while d < p:
            for r in range(p):
                b.sendrecv(r, (r + d) % p, 0, (r - d) % p)
            d <<= 1
    elif alg == "two_proc":
        need_two(p, "barrier", alg)
        for r in range(2):
            b.sendrecv(r, r ^ 1, 0, r ^ 1)
    elif alg == "tree":
        depth = 1
        while depth < p:
            depth <<= 1
        for r in range(p):
            jump = 1
            while jump < depth:
                partner = r ^ jump
                if not partner & (jump - 1) and partner < p:
                    if partner > r:
                        b.recv(r, partner)
                    elif partner < r:
                        b.send(r, partner, 0)
                jump <<= 1
            jump = depth >> 1
            while jump > 0:
                partner = r ^ jump
                if not partner & (jump - 1) and partner < p:
                    if partner > r:
                        b.send(r, partner, 0)
                    elif partner < r:
                        b.recv(r, partner)
                jump >>= 1
