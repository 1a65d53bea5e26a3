"""What each Open MPI 5.0 coll/tuned algorithm sends: per-rank programs of point-to-point steps.

Derived from the structure of Open MPI's `ompi/mca/coll/base` algorithms (v5.0.x): which
rank sends how many bytes to which rank, in which order, and what each rank waits for. No
data is moved; only message sizes and dependencies are kept.

A program is, per rank, a list of `Step`s executed in order. A step posts its sends (they
leave one after another on the rank's send port) and its receives (completed in arrival
order on the rank's receive port), and ends when all of them are done; the next step starts
then. A blocking MPI call is a step of its own; a group of isend/irecv followed by a waitall
is one step. Receives match sends in FIFO order per (source, destination) pair, as MPI's
non-overtaking rule does for one tag. A receive flagged `reduce` is followed by a local
reduction of the received bytes; `compute` adds reduction work not tied to a message.

Sizes are "bytes per rank as OSU counts them" (osu_* -m argument): the buffer of bcast,
reduce and allreduce; each rank's block for gather, scatter and allgather; each pair's block
for alltoall. Barrier ignores the size. `dtype_size` (OSU's default MPI_CHAR: 1) matters where
Open MPI counts elements (segments, block splits, fallbacks when count < P).

Forced algorithms are unsegmented unless `segsize` (bytes) is given, as in Open MPI; chain
fanout and knomial radix default to 4. Open MPI's own fallbacks are reproduced (e.g.
scatter_allgather → basic_linear when count < P; recursive_doubling allgather → bruck when P
is not a power of two; segmented_ring → ring when the segment would not split the buffer).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Final

from collbench.errors import UserError, did_you_mean

ALGORITHMS: Final[dict[str, tuple[str, ...]]] = {
    "bcast": ("basic_linear", "chain", "pipeline", "split_binary_tree", "binary_tree",
              "binomial", "knomial", "scatter_allgather", "scatter_allgather_ring"),
    "gather": ("basic_linear", "binomial", "linear_sync"),
    "scatter": ("basic_linear", "binomial", "linear_nb"),
    "reduce": ("linear", "chain", "pipeline", "binary", "binomial", "in-order_binary",
               "rabenseifner"),
    "allreduce": ("basic_linear", "nonoverlapping", "recursive_doubling", "ring",
                  "segmented_ring", "rabenseifner"),
    "allgather": ("linear", "bruck", "recursive_doubling", "ring", "neighbor", "two_proc",
                  "sparbit"),
    "alltoall": ("linear", "pairwise", "modified_bruck", "linear_sync", "two_proc"),
    "barrier": ("linear", "double_ring", "recursive_doubling", "bruck", "two_proc", "tree"),
}
DEFAULT_CHAIN_FANOUT: Final = 4
DEFAULT_KNOMIAL_RADIX: Final = 4
# Algorithms that call the communicator's current (decision-chosen) reduce/bcast/gather:
# Open MPI uses its fixed decision rules there; we use these unless told otherwise.
DEFAULT_INNER: Final = {"reduce": "binomial", "bcast": "binomial", "gather": "binomial"}


@dataclass(frozen=True)
class Step:
    """Sends (dst, bytes) leave in order; receives (src, reduce?) complete in arrival order."""

    sends: tuple[tuple[int, int], ...] = ()
    recvs: tuple[tuple[int, bool], ...] = ()
    compute: int = 0  # bytes of local reduction after the step's messages


@dataclass
class Params:
    """Algorithm parameters as Open MPI's forced-algorithm MCA variables set them."""

    segsize: int = 0
    fanout: int = DEFAULT_CHAIN_FANOUT
    radix: int = DEFAULT_KNOMIAL_RADIX
    dtype_size: int = 1
    root: int = 0
    max_requests: int = 0
    inner: dict[str, str] = field(default_factory=lambda: dict(DEFAULT_INNER))


Program = list[list[Step]]


class _B:
    """Builder of per-rank programs."""

    def __init__(self, p: int) -> None:
        self.p = p
        self.progs: Program = [[] for _ in range(p)]

    def step(self, r: int, sends: Sequence[tuple[int, int]] = (),
             recvs: Sequence[tuple[int, bool]] = (), compute: int = 0) -> None:
        sends = tuple((d, b) for d, b in sends if d != r)
        recvs = tuple((s, red) for s, red in recvs if s != r)
        if sends or recvs or compute:
            self.progs[r].append(Step(sends, recvs, compute))

    def send(self, r: int, dst: int, nbytes: int) -> None:
        self.step(r, sends=[(dst, nbytes)])

    def recv(self, r: int, src: int, reduce: bool = False) -> None:
        self.step(r, recvs=[(src, reduce)])

    def sendrecv(self, r: int, dst: int, nbytes: int, src: int, reduce: bool = False) -> None:
        self.step(r, sends=[(dst, nbytes)], recvs=[(src, reduce)])


# ---------------------------------------------------------------------------------------
# trees (children lists per real rank, in the order Open MPI's topology code lists them)


def _level_of(fanout: int, s: int) -> int:
    level, num = 0, 0
    while num <= s:
        num += fanout ** level
        level += 1
    return level - 1


def tree_kary(p: int, fanout: int, root: int) -> list[list[int]]:
    """coll_base_topo_build_tree: children of shifted rank s on level l are s + f^l·(i+1)."""
    out: list[list[int]] = [[] for _ in range(p)]
    for s in range(p):
        delta = fanout ** _level_of(fanout, s)
        for i in range(fanout):
            child = s + delta * (i + 1)
            if child >= p:
                break
            out[(s + root) % p].append((child + root) % p)
    return out


def tree_chain(p: int, fanout: int, root: int) -> list[list[int]]:
    """coll_base_topo_build_chain: `fanout` chains of consecutive ranks hang off the root;
    the first (P-1) mod fanout chains are one rank longer."""
    out: list[list[int]] = [[] for _ in range(p)]
    if p < 2:
        return out
    f = max(1, min(fanout, p - 1))
    longest = -(-(p - 1) // f)
    mark = (p - 1) % f or f + 1
    s = 1
    for c in range(f):
        length = longest if c < mark else longest - 1
        if length <= 0:
            continue
        out[root].append((s + root) % p)
        for k in range(s, s + length - 1):
            out[(k + root) % p].append((k + 1 + root) % p)
        s += length
    return out


def tree_binomial(p: int, root: int) -> list[list[int]]:
    """coll_base_topo_build_bmtree: children of index i are i ^ 2^j for 2^j > i."""
    out: list[list[int]] = [[] for _ in range(p)]
    for i in range(p):
        mask = 1
        while mask <= i:
            mask <<= 1
        while mask < p:
            child = i ^ mask
            if child >= p:
                break
            out[(i + root) % p].append((child + root) % p)
            mask <<= 1
    return out


def tree_in_order_binomial(p: int, root: int) -> list[list[int]]:
    """coll_base_topo_build_in_order_bmtree: children v + 2^j below v's lowest set bit."""
    out: list[list[int]] = [[] for _ in range(p)]
    for v in range(p):
        mask = 1
        while mask < p:
            remote = v ^ mask
            if remote < v:
                break
            if remote < p:
                out[(v + root) % p].append((remote + root) % p)
            mask <<= 1
    return out


def tree_knomial(p: int, root: int, radix: int) -> list[list[int]]:
    """coll_base_topo_build_kmtree: children v + mask·r (r < radix), largest mask first."""
    out: list[list[int]] = [[] for _ in range(p)]
    for v in range(p):
        mask = 1
        while mask < p:
            if v % (radix * mask):
                break
            mask *= radix
        mask //= radix
        while mask > 0:
            for r in range(1, radix):
                child = v + mask * r
                if child < p:
                    out[(v + root) % p].append((child + root) % p)
            mask //= radix
    return out


def tree_in_order_binary(p: int) -> list[list[int]]:
    """coll_base_topo_build_in_order_bintree: root P-1; the left subtree holds the upper
    ranks below the root, the right subtree the lower half, recursively."""
    out: list[list[int]] = [[] for _ in range(p)]

    def build(lo: int, n: int) -> None:  # ranks lo .. lo+n-1, root lo+n-1
        parent = lo + n - 1
        if n == 2:
            out[parent].append(lo)
        elif n > 2:
            right = n >> 1  # the right subtree holds ranks lo .. lo+right-1
            out[parent] += [parent - 1, lo + right - 1]
            build(lo + right, n - right - 1)
            build(lo, right)

    build(0, p)
    return out


def parents(children: list[list[int]]) -> list[int]:
    par = [-1] * len(children)
    for r, kids in enumerate(children):
        for c in kids:
            par[c] = r
    return par


# ---------------------------------------------------------------------------------------
# segment arithmetic


def seg_count(segsize: int, dtype: int, count: int) -> int:
    """COLL_BASE_COMPUTED_SEGCOUNT: elements per segment (count when unsegmented)."""
    if dtype <= segsize < dtype * count:
        sc = segsize // dtype
        if segsize - sc * dtype > dtype >> 1:
            sc += 1
        return sc
    return count


def segments(count: int, segcount: int, dtype: int) -> list[int]:
    """Bytes of each segment of `count` elements cut in `segcount` pieces."""
    if count <= 0 or segcount <= 0:
        return [0]
    ns = -(-count // segcount)
    return [segcount * dtype] * (ns - 1) + [(count - (ns - 1) * segcount) * dtype]


def block_counts(count: int, nblocks: int) -> list[int]:
    """COLL_BASE_COMPUTE_BLOCKCOUNT: the first count % n blocks get one element more."""
    early, split = -(-count // nblocks), count % nblocks
    late = count // nblocks
    return [early if i < split else late for i in range(nblocks)] if split else \
        [late] * nblocks


# ---------------------------------------------------------------------------------------
# generic tree algorithms


def _bcast_tree(b: _B, children: list[list[int]], root: int, segs: list[int]) -> None:
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


def _reduce_tree(b: _B, children: list[list[int]], root: int, segs: list[int]) -> None:
    par = parents(children)
    for r in range(b.p):
        kids = children[r]
        up = r != root
        if not kids:
            if up:
                b.step(r, sends=[(par[r], s) for s in segs])
            continue
        for j, _s in enumerate(segs):
            for i, c in enumerate(kids):
                sends = [(par[r], segs[j - 1])] if up and i == 0 and j > 0 else []
                b.step(r, sends=sends, recvs=[(c, True)])
        if up:
            b.send(r, par[r], segs[-1])


def _linear_bcast(b: _B, root: int, nbytes: int) -> None:
    b.step(root, sends=[(i, nbytes) for i in range(b.p) if i != root])
    for i in range(b.p):
        if i != root:
            b.recv(i, root)


def _linear_reduce(b: _B, root: int, nbytes: int) -> None:
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


def _bcast(b: _B, alg: str, nbytes: int, pr: Params) -> None:
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


def _bcast_split_bintree(b: _B, count: int, pr: Params) -> None:
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


def _bcast_scatter_allgather(b: _B, count: int, pr: Params, ring: bool) -> None:
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


def _gather(b: _B, alg: str, nbytes: int, pr: Params) -> None:
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
            b.step(root, sends=[(i, 0)], recvs=[(i, False)])
        b.step(root, recvs=[(i, False) for i in range(p) if i != root])


def _scatter(b: _B, alg: str, nbytes: int, pr: Params) -> None:
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


# ---------------------------------------------------------------------------------------
# reduce / allreduce


def _reduce(b: _B, alg: str, nbytes: int, pr: Params) -> None:
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


def _rabenseifner(b: _B, count: int, dt: int, root: int | None) -> None:
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


def _allreduce(b: _B, alg: str, nbytes: int, pr: Params) -> None:
    p, dt = b.p, pr.dtype_size
    count = nbytes // dt
    m = count * dt
    if alg == "basic_linear":
        _linear_reduce(b, 0, m)
        _linear_bcast(b, 0, m)
    elif alg == "nonoverlapping":
        inner_r = pr.inner.get("reduce", DEFAULT_INNER["reduce"])
        inner_b = pr.inner.get("bcast", DEFAULT_INNER["bcast"])
        _check(inner_r, "reduce", "inner reduce")
        _check(inner_b, "bcast", "inner bcast")
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


def _allreduce_recdbl(b: _B, m: int) -> None:
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


def _allreduce_ring(b: _B, count: int, dt: int, phases: int) -> None:
    p = b.p
    blocks = block_counts(count, p)
    parts = [block_counts(bc, phases) for bc in blocks]
    for r in range(p):
        right, left = (r + 1) % p, (r - 1) % p
        for ph in range(phases):
            # reduce-scatter: send my block, then forward each block just reduced
            b.step(r, sends=[(right, parts[r][ph] * dt)], recvs=[(left, True)])
            for k in range(2, p):
                prev = (r - k + 1) % p
                b.step(r, sends=[(right, parts[prev][ph] * dt)], recvs=[(left, True)])
        for k in range(p - 1):
            blk = (r + 1 - k) % p
            b.sendrecv(r, right, blocks[blk] * dt, left)


# ---------------------------------------------------------------------------------------
# allgather / alltoall / barrier


def _allgather(b: _B, alg: str, nbytes: int, pr: Params) -> None:
    p, dt = b.p, pr.dtype_size
    m = nbytes // dt * dt
    if alg == "recursive_doubling" and p & (p - 1):
        alg = "bruck"
    if alg == "neighbor" and p % 2:
        alg = "ring"
    if alg == "linear":
        inner_g = pr.inner.get("gather", DEFAULT_INNER["gather"])
        inner_b = pr.inner.get("bcast", DEFAULT_INNER["bcast"])
        _check(inner_g, "gather", "inner gather")
        _check(inner_b, "bcast", "inner bcast")
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
        _need_two(p, "allgather", alg)
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


def _alltoall(b: _B, alg: str, nbytes: int, pr: Params) -> None:
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
        _need_two(p, "alltoall", alg)
        for r in range(2):
            b.sendrecv(r, r ^ 1, m, r ^ 1)


def _barrier(b: _B, alg: str, pr: Params) -> None:
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
            for _ in range(2):
                if r > 0:
                    b.recv(r, left)
                    b.send(r, right, 0)
                else:
                    b.send(r, right, 0)
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
            if r < p - adj:
                b.send(r, r + adj, 0)
    elif alg == "bruck":
        d = 1
        while d < p:
            for r in range(p):
                b.sendrecv(r, (r + d) % p, 0, (r - d) % p)
            d <<= 1
    elif alg == "two_proc":
        _need_two(p, "barrier", alg)
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


def _need_two(p: int, coll: str, alg: str) -> None:
    if p != 2:
        raise UserError(f"{coll}: algorithm {alg}: nprocs {p} is not valid; valid: 2 (Open "
                        "MPI returns MPI_ERR_UNSUPPORTED_OPERATION otherwise)")


def _check(alg: str, coll: str, what: str = "algorithm") -> None:
    if coll not in ALGORITHMS:
        raise UserError(f"collective: {coll!r} is not valid; valid: {', '.join(ALGORITHMS)}"
                        f"{did_you_mean(coll, ALGORITHMS)}")
    if alg not in ALGORITHMS[coll]:
        raise UserError(f"{coll}: {what} {alg!r} is not valid; valid: "
                        f"{', '.join(ALGORITHMS[coll])}{did_you_mean(alg, ALGORITHMS[coll])}")


def program(collective: str, algorithm: str, nprocs: int, size: int,
            params: Params | None = None) -> Program:
    """Per-rank programs of `algorithm` for `collective` on nprocs ranks, `size` bytes as
    OSU counts them."""
    _check(algorithm, collective)
    pr = params or Params()
    if isinstance(nprocs, bool) or not isinstance(nprocs, int) or nprocs < 1:
        raise UserError(f"{collective}: nprocs {nprocs!r} is not valid; valid: an integer >= 1")
    if isinstance(size, bool) or not isinstance(size, int) or size < 0:
        raise UserError(f"{collective}: size {size!r} is not valid; valid: bytes >= 0")
    if not 0 <= pr.root < nprocs:
        raise UserError(f"{collective}: root {pr.root} is not valid; valid: 0-{nprocs - 1}")
    for name, low in (("segsize", 0), ("fanout", 1), ("radix", 2), ("dtype_size", 1),
                      ("max_requests", 0)):
        value = getattr(pr, name)
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise UserError(f"{collective}: {name} {value!r} is not valid; valid: an "
                            f"integer >= {low}")
    b = _B(nprocs)
    if nprocs == 1:
        return b.progs
    if collective == "bcast":
        _bcast(b, algorithm, size, pr)
    elif collective == "gather":
        _gather(b, algorithm, size, pr)
    elif collective == "scatter":
        _scatter(b, algorithm, size, pr)
    elif collective == "reduce":
        _reduce(b, algorithm, size, pr)
    elif collective == "allreduce":
        _allreduce(b, algorithm, size, pr)
    elif collective == "allgather":
        _allgather(b, algorithm, size, pr)
    elif collective == "alltoall":
        _alltoall(b, algorithm, size, pr)
    else:
        _barrier(b, algorithm, pr)
    return b.progs


def messages(progs: Program) -> list[tuple[int, int, int]]:
    """Every point-to-point message (src, dst, bytes) of a program, in program order."""
    return [(r, d, n) for r, steps in enumerate(progs) for st in steps for d, n in st.sends]
