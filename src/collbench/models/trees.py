"""Communication trees and message segmentation as Open MPI's coll/base builds them."""

from __future__ import annotations

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
