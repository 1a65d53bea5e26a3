/*
 * Trees used by the collbench ports. Each builder gives one rank's parent and children, in
 * the order the algorithms serve them, for the tree shapes of Open MPI's
 * ompi/mca/coll/base/coll_base_topo.c (v5.0.x):
 *   cbp_tree_kary              ~ ompi_coll_base_topo_build_tree (fanout 2: "bintree")
 *   cbp_tree_in_order_binary   ~ ompi_coll_base_topo_build_in_order_bintree
 *   cbp_tree_binomial          ~ ompi_coll_base_topo_build_bmtree
 *   cbp_tree_in_order_binomial ~ ompi_coll_base_topo_build_in_order_bmtree
 *   cbp_tree_knomial           ~ ompi_coll_base_topo_build_kmtree
 *   cbp_tree_chain             ~ ompi_coll_base_topo_build_chain (fanout 1: "pipeline")
 * Ranks are shifted so that the root is 0 ("virtual rank"), except for the in-order
 * binary tree, whose root is always size - 1.
 */
#include "cbp_internal.h"

static void tree_reset(cbp_tree_t *t, int root)
{
    t->root = root;
    t->parent = -1;
    t->nchildren = 0;
}

static int add_child(cbp_tree_t *t, int child)
{
    if (t->nchildren >= CBP_MAX_CHILDREN)
        return MPI_ERR_ARG;
    t->children[t->nchildren++] = child;
    return MPI_SUCCESS;
}

static int unshift(int v, int root, int size)
{
    return (v + root) % size;
}

/* Complete k-ary tree in level order over virtual ranks: level L holds fanout^L nodes;
 * the i-th child (i = 1..fanout) of node v on level L is v + i * fanout^L. */
int cbp_tree_kary(int fanout, int rank, int size, int root, cbp_tree_t *t)
{
    if (fanout < 1 || fanout > 32)
        return MPI_ERR_ARG;
    tree_reset(t, root);
    if (size < 2)
        return MPI_SUCCESS;
    int v = (rank - root + size) % size;
    /* find v's level: first_of_level = number of nodes above it, width = nodes on it */
    int first_of_level = 0, width = 1;
    while (v >= first_of_level + width) {
        first_of_level += width;
        width *= fanout;
    }
    for (int i = 1; i <= fanout; i++) {
        int c = v + i * width;
        if (c >= size)
            break;
        if (add_child(t, unshift(c, root, size)) != MPI_SUCCESS)
            return MPI_ERR_ARG;
    }
    if (v == 0)
        return MPI_SUCCESS;
    /* parent: the node p on the level above with v = p + i * (width / fanout) */
    int step = width / fanout;
    int p = v;
    if (v < fanout + 1) {
        p = 0;
    } else {
        while (p >= first_of_level)
            p -= step;
    }
    t->parent = unshift(p, root, size);
    return MPI_SUCCESS;
}

/* In-order binary tree: the subtree of n consecutive ranks [base, base + n) has its root
 * at base + n - 1; with n >= 3, its first child roots the upper part
 * [base + n/2, base + n - 1) and its second child the lower part [base, base + n/2);
 * with n == 2 the only child is base. */
int cbp_tree_in_order_binary(int rank, int size, cbp_tree_t *t)
{
    tree_reset(t, size - 1);
    int base = 0, n = size;
    while (n > 0) {
        int top = base + n - 1;
        int lower = n / 2;
        int first = n >= 2 ? top - 1 : -1;
        int second = n >= 3 ? base + lower - 1 : -1;
        if (rank == top) {
            if (first >= 0)
                add_child(t, first);
            if (second >= 0)
                add_child(t, second);
            return MPI_SUCCESS;
        }
        if (n == 2 || rank >= base + lower) {
            /* upper part (or the lone child of a pair) */
            if (rank == first)
                t->parent = top;
            if (n == 2) {
                base = rank;
                n = 1;
            } else {
                base += lower;
                n = n - lower - 1;
            }
        } else {
            if (rank == second)
                t->parent = top;
            n = lower;
        }
    }
    return MPI_SUCCESS;
}

/* Binomial tree, "highest bit" form: the parent of virtual rank v clears v's highest set
 * bit; the children of v are v + m for every power of two m > v (m ascending). */
int cbp_tree_binomial(int rank, int size, int root, cbp_tree_t *t)
{
    tree_reset(t, root);
    int v = (rank - root + size) % size;
    int m = cbp_next_pow2_above(v);
    if (v != 0)
        t->parent = unshift(v - (m >> 1), root, size);
    for (; m < size && v + m < size; m <<= 1)
        if (add_child(t, unshift(v + m, root, size)) != MPI_SUCCESS)
            return MPI_ERR_ARG;
    return MPI_SUCCESS;
}

/* Binomial tree, "lowest bit" (in-order) form: the parent of v clears v's lowest set bit;
 * the children of v are v + m for the powers of two m below v's lowest set bit. */
int cbp_tree_in_order_binomial(int rank, int size, int root, cbp_tree_t *t)
{
    tree_reset(t, root);
    int v = (rank - root + size) % size;
    for (int m = 1; m < size; m <<= 1) {
        if (v & m) {
            t->parent = unshift(v - m, root, size);
            break;
        }
        if (v + m < size && add_child(t, unshift(v + m, root, size)) != MPI_SUCCESS)
            return MPI_ERR_ARG;
    }
    return MPI_SUCCESS;
}

/* K-nomial tree: the parent of v zeroes v's lowest non-zero base-`radix` digit; the
 * children of v are v + r * radix^j (r = 1..radix-1) for the digits j below that one,
 * highest j first. */
int cbp_tree_knomial(int radix, int rank, int size, int root, cbp_tree_t *t)
{
    if (radix < 2)
        return MPI_ERR_ARG;
    tree_reset(t, root);
    int v = (rank - root + size) % size;
    int m = 1;
    while (m < size) {
        if (v % (radix * m) != 0) {
            t->parent = unshift(v / (radix * m) * (radix * m), root, size);
            break;
        }
        m *= radix;
    }
    for (m /= radix; m > 0; m /= radix)
        for (int r = 1; r < radix; r++)
            if (v + r * m < size && add_child(t, unshift(v + r * m, root, size)) != MPI_SUCCESS)
                return MPI_ERR_ARG;
    return MPI_SUCCESS;
}

/* Chains: the root feeds `fanout` chains that split the other size - 1 ranks (virtual
 * ranks 1..size-1, in order) into consecutive runs; when they do not divide evenly, the
 * first (size - 1) % fanout chains are one longer. */
int cbp_tree_chain(int fanout, int rank, int size, int root, cbp_tree_t *t)
{
    if (fanout < 1)
        fanout = 1;
    if (fanout > 32)
        fanout = 32;
    tree_reset(t, root);
    if (size < 2)
        return MPI_SUCCESS;
    if (fanout > size - 1)
        fanout = size - 1;
    int v = (rank - root + size) % size;
    int others = size - 1;
    int shortlen = others / fanout, nlong = others % fanout;
    /* chain c starts at head(c) and has len(c) members */
    int head = 1;
    for (int c = 0; c < fanout; c++) {
        int len = shortlen + (c < nlong ? 1 : 0);
        if (v == 0) {
            add_child(t, unshift(head, root, size));
        } else if (v >= head && v < head + len) {
            t->parent = unshift(v == head ? 0 : v - 1, root, size);
            if (v + 1 < head + len)
                add_child(t, unshift(v + 1, root, size));
        }
        head += len;
    }
    return MPI_SUCCESS;
}
