"""The compiled engine's queues, as arrays: the rank order, one heap of waiting jobs per GPU
demand (`Cluster.waiting`, `PriorityIndex`'s) and the greedy fill over them, heaps of rows in
heapq's order (the phase ends; the running jobs by stored key) and the running set in start
order.

Rows compare as tuples, as heapq compares its entries, so events and jobs come out in the very
order the reference engine's heaps give them.
"""

from __future__ import annotations

from .jit import njit


@njit(cache=True)
def before(major_a, key_a, arrival_a, a, major_b, key_b, arrival_b, b):
    """(key, arrival, id) of a ranks before that of b: PriorityScheduler._rank's order."""
    if major_a != major_b:
        return major_a < major_b
    if key_a != key_b:
        return key_a < key_b
    if arrival_a != arrival_b:
        return arrival_a < arrival_b
    return a < b


@njit(cache=True)
def ranks_before(a, b, major, key, arrival):
    """Job a ranks before job b, on the keys they were last given."""
    return before(major[a], key[a], arrival[a], a, major[b], key[b], arrival[b], b)


@njit(cache=True)
def wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival):
    """Put waiting job j into its demand class's heap (rank order: the best at the root)."""
    c = cls[j]
    base = cls_off[c]
    i = cls_size[c]
    cls_size[c] += 1
    while i > 0:
        parent = (i - 1) // 2
        m = wait[base + parent]
        if not ranks_before(j, m, major, key, arrival):
            break
        wait[base + i] = m
        i = parent
    wait[base + i] = j


@njit(cache=True)
def wait_pop(c, cls_off, cls_size, wait, major, key, arrival):
    """Remove the best-ranked job of demand class c."""
    base = cls_off[c]
    cls_size[c] -= 1
    size = cls_size[c]
    j = wait[base + size]                     # the last leaf sifts down from the root
    i = 0
    while True:
        child = 2 * i + 1
        if child >= size:
            break
        a = wait[base + child]
        if child + 1 < size:
            b = wait[base + child + 1]
            if ranks_before(b, a, major, key, arrival):
                child += 1
                a = b
        if not ranks_before(a, j, major, key, arrival):
            break
        wait[base + i] = a
        i = child
    wait[base + i] = j


@njit(cache=True)
def wait_remove(j, cls, cls_off, cls_size, wait, major, key, arrival):
    """Take waiting job j out of its demand class's heap, wherever it sits: raised to the root
    (as if it ranked first, which keeps the heap's order), then popped."""
    c = cls[j]
    base = cls_off[c]
    i = 0
    while wait[base + i] != j:
        i += 1
    while i > 0:
        parent = (i - 1) // 2
        wait[base + i] = wait[base + parent]
        i = parent
    wait[base] = j
    wait_pop(c, cls_off, cls_size, wait, major, key, arrival)


@njit(cache=True)
def best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, capacity):
    """The best-ranked waiting job needing at most `capacity` GPUs; -1 if none."""
    best = -1
    for c in range(cls_gpus.shape[0]):
        if cls_gpus[c] > capacity:
            break                              # classes ascend in demand
        if cls_size[c] > 0:
            m = wait[cls_off[c]]
            if best < 0 or ranks_before(m, best, major, key, arrival):
                best = m
    return best


@njit(cache=True)
def fill(capacity, after, n_after, gpus, arrival, cls, cls_gpus, cls_off, cls_size, wait, major,
         key, keep, to_start, n_start):
    """`_fill` over the rank order of the ranked running jobs `after` and the waiting lists.

    Waiting jobs that do not fit are skipped by the greedy fill and never fit later (capacity
    only shrinks), so at each step only the heads of the demand classes that still fit compete
    with the next running job. Returns the number of jobs to start (in `to_start`, rank order,
    taken off the waiting heaps, after the first `n_start`); `keep` marks the running jobs that
    keep their GPUs.
    """
    ri = 0
    while True:
        best = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, capacity)
        if ri < n_after and (best < 0 or ranks_before(after[ri], best, major, key, arrival)):
            j = after[ri]
            ri += 1
            keep[j] = gpus[j] <= capacity
            if keep[j]:
                capacity -= gpus[j]
            continue
        if best < 0:
            return n_start
        to_start[n_start] = best
        n_start += 1
        capacity -= gpus[best]
        wait_pop(cls[best], cls_off, cls_size, wait, major, key, arrival)


@njit(cache=True, inline="always")
def _row_lt(h, a, b):
    """Row a of heap array h sorts before row b: tuple order (first unequal column decides)."""
    for c in range(h.shape[1]):
        if h[a, c] != h[b, c]:
            return h[a, c] < h[b, c]
    return False


@njit(cache=True, inline="always")
def _row_copy(h, dst, src):
    for c in range(h.shape[1]):
        h[dst, c] = h[src, c]


@njit(cache=True, inline="always")
def _sift_down(h, start, pos):
    """heapq._siftdown over the rows of h, for the new item waiting in the scratch row (h's
    last): parents below it move down from `pos`, then it takes its place."""
    tmp = h.shape[0] - 1
    while pos > start:
        parent = (pos - 1) >> 1
        if _row_lt(h, tmp, parent):
            _row_copy(h, pos, parent)
            pos = parent
            continue
        break
    _row_copy(h, pos, tmp)


@njit(cache=True, inline="always")
def heap_pop(h, size):
    """heapq.heappop on the first `size` rows (read the root first); returns the new size."""
    size -= 1
    if size > 0:
        tmp = h.shape[0] - 1
        _row_copy(h, tmp, size)                # the last row, to sift from the root
        pos = 0                                # heapq._siftup
        child = 1
        while child < size:
            right = child + 1
            if right < size and not _row_lt(h, child, right):
                child = right
            _row_copy(h, pos, child)
            pos = child
            child = 2 * pos + 1
        _sift_down(h, 0, pos)
    return size


@njit(cache=True, inline="always")
def push_event(heap, size, time, seq, j, ep):
    """heapq.heappush of the phase end (time, seq, job, epoch); returns the new size."""
    tmp = heap.shape[0] - 1
    heap[tmp, 0], heap[tmp, 1], heap[tmp, 2], heap[tmp, 3] = time, seq, j, ep
    _sift_down(heap, 0, size)
    return size + 1


@njit(cache=True, inline="always")
def store_running_key(rheap, size, j, major, key, arrival, run_version):
    """(Re)file running job j in the max-heap under its current key; older entries go stale.
    Returns the heap's new size."""
    run_version[j] += 1
    tmp = rheap.shape[0] - 1
    rheap[tmp, 0], rheap[tmp, 1], rheap[tmp, 2] = -major[j], -key[j], -arrival[j]
    rheap[tmp, 3], rheap[tmp, 4] = -j, run_version[j]
    _sift_down(rheap, 0, size)
    return size + 1


@njit(cache=True, inline="always")
def leave_running(j, run_list, run_pos, run_seq, n_run):
    """Take job j out of the running set, which stays in start order (Cluster.running's dict
    order, which the env's reward sums in); returns the new count."""
    for q in range(run_pos[j], n_run - 1):
        m = run_list[q + 1]
        run_list[q] = m
        run_pos[m] = q
    run_pos[j] = -1
    run_seq[j] = -1
    return n_run - 1
