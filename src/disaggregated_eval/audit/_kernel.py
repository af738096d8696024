"""The slice bootstrap: every metric of every slice and of its complement, on every resample.

A resample is given by its drawn row indices (:func:`disaggregated_eval.bootstrap.resample_indices`,
so the resamples are those of the library's bootstrap engine for the same seed and scheme). For each
model the kernel walks the rows once in increasing score order (a stable argsort computed once) and
updates, per row and resample,

- the row's *cell* (its observed combination of all attributes' levels): the weighted positives
  ``Wp`` and negatives ``Wn``, log-loss and Brier sums, the AUC numerator of the cell, and two
  cross terms used for complements (below);
- for every other family of slices that is not the cells themselves (each attribute, each
  intersection of fewer than all attributes), the row's slice in that family: its AUC numerator and
  its running negatives;
- the whole population's running positives, negatives and AUC numerator.

So a row costs one update per family it belongs to, not one per slice. Additive sums of a slice
(and of its complement, the rest of the rows) are sums over cells, formed after the walk
the
threshold's false negatives and true negatives are the cells' running sums at the threshold
position of the walk (``yhat = 1[r >= threshold]``).

AUC of a complement. With ``H(d) = 1[d > 0] + 1/2 1[d = 0]`` and ``N(s) = sum_{i pos in s, j neg in
s} w_i w_j H(r_i - r_j)`` (the AUC numerator), the cross terms of a slice ``s`` are

    X1(s) = sum_{i pos in s} w_i sum_{j neg} w_j H(r_i - r_j)     (all negatives j)
    X2(s) = sum_{j neg in s} w_j sum_{i pos} w_i H(r_j - r_i)     (all positives i)

Splitting the pairs of ``N(all)`` by whether each member is in ``s`` or in its complement ``C``, and
using ``H(d) + H(-d) = 1``::

    N(C) = N(all) - X1(s) - Wp(all) Wn(s) + X2(s) + N(s).

``X1`` and ``X2`` are additive over rows (each row adds its weight times the population's weighted
negatives, resp. positives, below it, ties counted one half), hence over cells.

Ties. A run of rows with distinct scores updates as above. A tie group (rows of equal score) is
walked twice: the first pass adds each row to its cell's and slices' pending group sums
``pos_g, neg_g``, the second flushes every touched cell and slice once: ``N += pos_g (neg_below +
neg_g / 2)``, ``X1 += pos_g (Wn_below(all) + Wn_g(all) / 2)`` and likewise ``X2``.

Metrics come from the sums through :func:`disaggregated_eval.bootstrap.metrics_from_sums` (one home
of the formulas). The kernel is parallel over blocks of ``LANES`` resamples (each block computed by
one thread, in a fixed order: results do not depend on the thread count or batch size).
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numba
import numpy as np

from ..bootstrap import N_METRIC_SLOTS, metrics_from_sums, resample_indices
from ..metrics import pointwise_log_loss
from .slices import SlicePlan

__all__ = ["LANES", "ModelData", "prepare_model", "SliceBootstrap", "slice_bootstrap", "slice_point"]

#: Resamples walked together: one pass over the rows (and their data) serves four resamples.
LANES = 4

# Cell accumulator slots: cell_acc[c, slot, lane].
_CP, _CN, _AUC, _LOSS, _BR, _X1, _X2, _FN, _TN = 0, 1, 2, 3, 4, 5, 6, 7, 8
_N_CELL_SLOTS = 9
# Slice kinds for the AUC numerator of a slice.
_AUC_OVERALL, _AUC_CELL, _AUC_WALK = 0, 1, 2


@dataclass(frozen=True)
class ModelData:
    """One model's rows in its score order, with everything the walk reads.

    Attributes
    ----------
    order : ndarray (n,), int64
        Stable argsort of the scores: ``order[j]`` is the row at sorted position ``j``.
    y, log_loss, brier, weight : ndarray (n,), float64
        Label, per-row log loss, ``(r - y)^2`` and sample weight in sorted order.
    cells : ndarray (n,), int32
        Cell of each sorted row.
    walk : ndarray (n, n_walked_families), int32
        Walk index of each sorted row's slice in every walked family.
    seg_starts : ndarray (n_segments + 1,), int64
        Segments of the sorted rows (a tie group of >= 2 rows, or a run of distinct scores), ending with n.
    seg_tie : ndarray (n_segments,), bool
    seg_split : int
        First segment whose scores are >= threshold (n_segments if none).
    """

    order: np.ndarray
    y: np.ndarray
    log_loss: np.ndarray
    brier: np.ndarray
    weight: np.ndarray
    cells: np.ndarray
    walk: np.ndarray
    seg_starts: np.ndarray
    seg_tie: np.ndarray
    seg_split: int


@dataclass(frozen=True)
class _Layout:
    """How slices get their sums: walked families, the AUC source of each slice."""

    walk_ids: np.ndarray  # (n_rows, n_walked) int32 in original row order
    n_walk: int
    auc_kind: np.ndarray  # (n_slices,) int64
    auc_src: np.ndarray  # (n_slices,) int64: cell id / walk id / -1
    member: np.ndarray  # (n_slices, n_cells) bool: cell in slice


def _layout(plan: SlicePlan) -> _Layout:
    n_rows = plan.cell_codes.shape[0]
    walked = [f for f in range(1, len(plan.families)) if f != plan.full_family]
    walk_ids = np.zeros((n_rows, len(walked)), dtype=np.int32)
    auc_kind = np.zeros(plan.n_slices, dtype=np.int64)
    auc_src = np.full(plan.n_slices, -1, dtype=np.int64)
    offset = 0
    for k, f in enumerate(walked):
        family = plan.families[f]
        walk_ids[:, k] = offset + family.codes
        auc_kind[family.slice_ids] = _AUC_WALK
        auc_src[family.slice_ids] = offset + np.arange(family.n_slices)
        offset += family.n_slices
    if plan.full_family >= 0:
        family = plan.families[plan.full_family]
        auc_kind[family.slice_ids] = _AUC_CELL
        auc_src[plan.cell_slices[:, plan.full_family]] = np.arange(plan.n_cells)
    member = np.zeros((plan.n_slices, plan.n_cells), dtype=np.bool_)
    for f in range(len(plan.families)):
        member[plan.cell_slices[:, f], np.arange(plan.n_cells)] = True
    return _Layout(walk_ids, offset, auc_kind, auc_src, member)


def _segments(r_sorted: np.ndarray, threshold: float) -> tuple[np.ndarray, np.ndarray, int]:
    """Tie groups and runs of distinct scores, split at the threshold position."""
    n = r_sorted.shape[0]
    group_start = np.concatenate(([0], np.flatnonzero(np.diff(r_sorted) != 0.0) + 1, [n]))
    tie = np.diff(group_start) > 1
    k0 = int(np.searchsorted(r_sorted, threshold, side="left"))  # a group start (or n)
    tie_start = group_start[:-1][tie]
    bounds = np.unique(np.concatenate(([0, n, k0], tie_start, group_start[1:][tie]))).astype(np.int64)
    is_tie = np.isin(bounds[:-1], tie_start)
    split = int(np.searchsorted(bounds, k0, side="left"))
    return bounds, is_tie, split


def prepare_model(
    y: np.ndarray, score: np.ndarray, weight: np.ndarray, layout: _Layout, cells: np.ndarray, threshold: float
) -> ModelData:
    """Sort one model's rows by score and lay out what the walk reads (see :class:`ModelData`)."""
    order = np.argsort(score, kind="stable").astype(np.int64)
    r_sorted = score[order]
    starts, tie, split = _segments(r_sorted, threshold)
    return ModelData(
        order=order,
        y=np.ascontiguousarray(y[order], dtype=np.float64),
        log_loss=np.ascontiguousarray(pointwise_log_loss(y, score)[order]),
        brier=np.ascontiguousarray(((score - y) ** 2)[order]),
        weight=np.ascontiguousarray(weight[order], dtype=np.float64),
        cells=np.ascontiguousarray(cells[order], dtype=np.int32),
        walk=np.ascontiguousarray(layout.walk_ids[order], dtype=np.int32),
        seg_starts=starts,
        seg_tie=tie,
        seg_split=split,
    )


# ----------------------------------------------------------------------------------------------
# numba kernels
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True, inline="always")
def _add4(acc, b, v0, v1, v2, v3):
    """``acc[b + lane] += v_lane`` for the 4 lanes (adjacent slots: 4 loads, then 4 stores)."""
    a0 = acc[b]
    a1 = acc[b + 1]
    a2 = acc[b + 2]
    a3 = acc[b + 3]
    acc[b] = a0 + v0
    acc[b + 1] = a1 + v1
    acc[b + 2] = a2 + v2
    acc[b + 3] = a3 + v3


# Flat accumulator layouts: cell_acc[(c * _N_CELL_SLOTS + slot) * LANES + lane],
# fam_acc[(s * 2 + slot) * LANES + lane] with slot 0 = running negatives, 1 = AUC numerator.
_CELL_STRIDE = _N_CELL_SLOTS * LANES
_FAM_STRIDE = 2 * LANES


@numba.njit(cache=True)
def _walk(
    cnt,
    y,
    ll,
    br,
    sw,
    cells,
    walk,
    seg_starts,
    seg_tie,
    seg_split,
    cell_acc,
    fam_acc,
    ov,
    cell_pend,
    fam_pend,
    cell_flag,
    fam_flag,
):
    """One model's walk for LANES resamples; ``cnt[lane, j]`` = count of sorted row j in resample lane.

    Accumulators are flat (see ``_CELL_STRIDE``), the four lanes of a slot adjacent; the population's
    running sums stay in registers.
    """
    n_cells = cell_acc.shape[0] // _CELL_STRIDE
    n_fw = walk.shape[1]
    cell_acc[:] = 0.0
    fam_acc[:] = 0.0
    P0 = 0.0  # population: weighted positives so far
    P1 = 0.0
    P2 = 0.0
    P3 = 0.0
    N0 = 0.0  # weighted negatives so far
    N1 = 0.0
    N2 = 0.0
    N3 = 0.0
    A0 = 0.0  # AUC numerator
    A1 = 0.0
    A2 = 0.0
    A3 = 0.0
    n_seg = seg_tie.shape[0]
    for seg in range(n_seg + 1):
        if seg == seg_split:
            for c in range(n_cells):
                b = c * _CELL_STRIDE
                for lane in range(LANES):
                    cell_acc[b + _FN * LANES + lane] = cell_acc[b + _CP * LANES + lane]
                    cell_acc[b + _TN * LANES + lane] = cell_acc[b + _CN * LANES + lane]
        if seg == n_seg:
            break
        start = seg_starts[seg]
        stop = seg_starts[seg + 1]
        if not seg_tie[seg]:
            for j in range(start, stop):
                b = cells[j] * _CELL_STRIDE
                yj = y[j]
                lj = ll[j]
                bj = br[j]
                swj = sw[j]
                w0 = cnt[0, j] * swj
                w1 = cnt[1, j] * swj
                w2 = cnt[2, j] * swj
                w3 = cnt[3, j] * swj
                p0 = w0 * yj
                p1 = w1 * yj
                p2 = w2 * yj
                p3 = w3 * yj
                q0 = w0 - p0
                q1 = w1 - p1
                q2 = w2 - p2
                q3 = w3 - p3
                _add4(cell_acc, b + _X1 * LANES, p0 * N0, p1 * N1, p2 * N2, p3 * N3)
                _add4(cell_acc, b + _X2 * LANES, q0 * P0, q1 * P1, q2 * P2, q3 * P3)
                A0 += p0 * N0
                A1 += p1 * N1
                A2 += p2 * N2
                A3 += p3 * N3
                P0 += p0
                P1 += p1
                P2 += p2
                P3 += p3
                N0 += q0
                N1 += q1
                N2 += q2
                N3 += q3
                k = b + _CN * LANES
                c0 = cell_acc[k]
                c1 = cell_acc[k + 1]
                c2 = cell_acc[k + 2]
                c3 = cell_acc[k + 3]
                _add4(cell_acc, b + _AUC * LANES, p0 * c0, p1 * c1, p2 * c2, p3 * c3)
                _add4(cell_acc, b + _CP * LANES, p0, p1, p2, p3)
                _add4(cell_acc, k, q0, q1, q2, q3)
                _add4(cell_acc, b + _LOSS * LANES, w0 * lj, w1 * lj, w2 * lj, w3 * lj)
                _add4(cell_acc, b + _BR * LANES, w0 * bj, w1 * bj, w2 * bj, w3 * bj)
                for f in range(n_fw):
                    k = walk[j, f] * _FAM_STRIDE
                    c0 = fam_acc[k]
                    c1 = fam_acc[k + 1]
                    c2 = fam_acc[k + 2]
                    c3 = fam_acc[k + 3]
                    _add4(fam_acc, k + LANES, p0 * c0, p1 * c1, p2 * c2, p3 * c3)
                    _add4(fam_acc, k, q0, q1, q2, q3)
        else:
            # Pass 1: pending sums of the tie group per cell, slice and the population.
            G0 = 0.0  # group's weighted positives
            G1 = 0.0
            G2 = 0.0
            G3 = 0.0
            H0 = 0.0  # group's weighted negatives
            H1 = 0.0
            H2 = 0.0
            H3 = 0.0
            for j in range(start, stop):
                c = cells[j]
                b = c * _CELL_STRIDE
                yj = y[j]
                lj = ll[j]
                bj = br[j]
                swj = sw[j]
                w0 = cnt[0, j] * swj
                w1 = cnt[1, j] * swj
                w2 = cnt[2, j] * swj
                w3 = cnt[3, j] * swj
                p0 = w0 * yj
                p1 = w1 * yj
                p2 = w2 * yj
                p3 = w3 * yj
                q0 = w0 - p0
                q1 = w1 - p1
                q2 = w2 - p2
                q3 = w3 - p3
                G0 += p0
                G1 += p1
                G2 += p2
                G3 += p3
                H0 += q0
                H1 += q1
                H2 += q2
                H3 += q3
                cell_flag[c] = True
                _add4(cell_pend, c * _FAM_STRIDE, p0, p1, p2, p3)
                _add4(cell_pend, c * _FAM_STRIDE + LANES, q0, q1, q2, q3)
                _add4(cell_acc, b + _LOSS * LANES, w0 * lj, w1 * lj, w2 * lj, w3 * lj)
                _add4(cell_acc, b + _BR * LANES, w0 * bj, w1 * bj, w2 * bj, w3 * bj)
                for f in range(n_fw):
                    s = walk[j, f]
                    fam_flag[s] = True
                    _add4(fam_pend, s * _FAM_STRIDE, p0, p1, p2, p3)
                    _add4(fam_pend, s * _FAM_STRIDE + LANES, q0, q1, q2, q3)
            # Pass 2: flush every touched cell and slice once; the population sums are still those below.
            M0 = N0 + 0.5 * H0
            M1 = N1 + 0.5 * H1
            M2 = N2 + 0.5 * H2
            M3 = N3 + 0.5 * H3
            Q0 = P0 + 0.5 * G0
            Q1 = P1 + 0.5 * G1
            Q2 = P2 + 0.5 * G2
            Q3 = P3 + 0.5 * G3
            for j in range(start, stop):
                c = cells[j]
                if cell_flag[c]:
                    cell_flag[c] = False
                    b = c * _CELL_STRIDE
                    k = c * _FAM_STRIDE
                    g0 = cell_pend[k]
                    g1 = cell_pend[k + 1]
                    g2 = cell_pend[k + 2]
                    g3 = cell_pend[k + 3]
                    h0 = cell_pend[k + 4]
                    h1 = cell_pend[k + 5]
                    h2 = cell_pend[k + 6]
                    h3 = cell_pend[k + 7]
                    for lane in range(2 * LANES):
                        cell_pend[k + lane] = 0.0
                    _add4(cell_acc, b + _X1 * LANES, g0 * M0, g1 * M1, g2 * M2, g3 * M3)
                    _add4(cell_acc, b + _X2 * LANES, h0 * Q0, h1 * Q1, h2 * Q2, h3 * Q3)
                    i = b + _CN * LANES
                    c0 = cell_acc[i] + 0.5 * h0
                    c1 = cell_acc[i + 1] + 0.5 * h1
                    c2 = cell_acc[i + 2] + 0.5 * h2
                    c3 = cell_acc[i + 3] + 0.5 * h3
                    _add4(cell_acc, b + _AUC * LANES, g0 * c0, g1 * c1, g2 * c2, g3 * c3)
                    _add4(cell_acc, b + _CP * LANES, g0, g1, g2, g3)
                    _add4(cell_acc, i, h0, h1, h2, h3)
                for f in range(n_fw):
                    s = walk[j, f]
                    if fam_flag[s]:
                        fam_flag[s] = False
                        k = s * _FAM_STRIDE
                        g0 = fam_pend[k]
                        g1 = fam_pend[k + 1]
                        g2 = fam_pend[k + 2]
                        g3 = fam_pend[k + 3]
                        h0 = fam_pend[k + 4]
                        h1 = fam_pend[k + 5]
                        h2 = fam_pend[k + 6]
                        h3 = fam_pend[k + 7]
                        for lane in range(2 * LANES):
                            fam_pend[k + lane] = 0.0
                        c0 = fam_acc[k] + 0.5 * h0
                        c1 = fam_acc[k + 1] + 0.5 * h1
                        c2 = fam_acc[k + 2] + 0.5 * h2
                        c3 = fam_acc[k + 3] + 0.5 * h3
                        _add4(fam_acc, k + LANES, g0 * c0, g1 * c1, g2 * c2, g3 * c3)
                        _add4(fam_acc, k, h0, h1, h2, h3)
            A0 += G0 * M0
            A1 += G1 * M1
            A2 += G2 * M2
            A3 += G3 * M3
            P0 += G0
            P1 += G1
            P2 += G2
            P3 += G3
            N0 += H0
            N1 += H1
            N2 += H2
            N3 += H3
    ov[0, 0] = P0
    ov[0, 1] = P1
    ov[0, 2] = P2
    ov[0, 3] = P3
    ov[1, 0] = N0
    ov[1, 1] = N1
    ov[1, 2] = N2
    ov[1, 3] = N3
    ov[2, 0] = A0
    ov[2, 1] = A1
    ov[2, 2] = A2
    ov[2, 3] = A3


@numba.njit(cache=True)
def _finalize(cell_acc, fam_acc, ov, member, auc_kind, auc_src, slots, odds, n_lanes, b0, m, out, values):
    """Metrics of every slice (side 0) and its complement (side 1) for each lane; into out[b0 + lane, m]."""
    n_slices = member.shape[0]
    n_cells = member.shape[1]
    n_q = slots.shape[0]
    for lane in range(n_lanes):
        for s in range(n_slices):
            wp = 0.0
            wn = 0.0
            fn = 0.0
            tn = 0.0
            lo = 0.0
            bs = 0.0
            x1 = 0.0
            x2 = 0.0
            wpc = 0.0
            wnc = 0.0
            fnc = 0.0
            tnc = 0.0
            loc = 0.0
            bsc = 0.0
            for c in range(n_cells):
                b = c * _CELL_STRIDE + lane
                if member[s, c]:
                    wp += cell_acc[b + _CP * LANES]
                    wn += cell_acc[b + _CN * LANES]
                    fn += cell_acc[b + _FN * LANES]
                    tn += cell_acc[b + _TN * LANES]
                    lo += cell_acc[b + _LOSS * LANES]
                    bs += cell_acc[b + _BR * LANES]
                    x1 += cell_acc[b + _X1 * LANES]
                    x2 += cell_acc[b + _X2 * LANES]
                else:
                    wpc += cell_acc[b + _CP * LANES]
                    wnc += cell_acc[b + _CN * LANES]
                    fnc += cell_acc[b + _FN * LANES]
                    tnc += cell_acc[b + _TN * LANES]
                    loc += cell_acc[b + _LOSS * LANES]
                    bsc += cell_acc[b + _BR * LANES]
            kind = auc_kind[s]
            if kind == _AUC_OVERALL:
                auc = ov[2, lane]
            elif kind == _AUC_CELL:
                src = auc_src[s]
                auc = cell_acc[src * _CELL_STRIDE + _AUC * LANES + lane] if src >= 0 else 0.0
            else:
                auc = fam_acc[auc_src[s] * _FAM_STRIDE + LANES + lane]
            metrics_from_sums(wp, wn, wp - fn, fn, tn, wn - tn, lo, bs, auc, odds, values)
            for q in range(n_q):
                out[b0 + lane, m, s, 0, q] = values[slots[q]]
            # N(C) = N(all) - X1(s) - Wp(all) Wn(s) + X2(s) + N(s)  (module docstring)
            auc_c = ov[2, lane] - x1 - (wp + wpc) * wn + x2 + auc
            metrics_from_sums(wpc, wnc, wpc - fnc, fnc, tnc, wnc - tnc, loc, bsc, auc_c, odds, values)
            for q in range(n_q):
                out[b0 + lane, m, s, 1, q] = values[slots[q]]


@numba.njit(parallel=True, cache=True)
def _slice_kernel(
    indices,
    orders,
    identity,
    ys,
    lls,
    brs,
    sws,
    cellss,
    walks,
    seg_starts,
    seg_ties,
    seg_splits,
    seg_offsets,
    member,
    auc_kind,
    auc_src,
    slots,
    odds,
    n_threads,
    cnt_buf,
    sc_buf,
    cell_bufs,
    fam_bufs,
    ov_bufs,
    cell_pends,
    fam_pends,
    cell_flags,
    fam_flags,
    value_bufs,
    overflow,
    out,
):
    """Blocks of LANES resamples; block k is computed by thread ``k % n_threads`` (fixed schedule).

    ``cnt_buf[t, lane, i]`` counts row i (original order) in resample ``lane`` of the block (uint16;
    a wrap-around, which needs one row drawn 65,536 times, is flagged in ``overflow``). Model m's
    walk reads the counts in its score order: directly when ``identity[m]`` (the rows are already
    in that order), else gathered through ``orders[m]``.
    """
    n_batch, n = indices.shape
    n_models = ys.shape[0]
    n_blocks = (n_batch + LANES - 1) // LANES
    for t in numba.prange(n_threads):
        cnt = cnt_buf[t]
        sc = sc_buf[t]
        for block in range(t, n_blocks, n_threads):
            b0 = block * LANES
            n_lanes = min(LANES, n_batch - b0)
            cnt[:] = 0
            for lane in range(n_lanes):
                row = cnt[lane]
                for k in range(n):
                    i = indices[b0 + lane, k]
                    v = row[i] + np.uint16(1)
                    row[i] = v
                    if v == 0:
                        overflow[t] = True
            for m in range(n_models):
                if identity[m]:
                    counts = cnt
                else:
                    order_m = orders[m]
                    for lane in range(LANES):
                        src = cnt[lane]
                        dst = sc[lane]
                        for j in range(n):
                            dst[j] = src[order_m[j]]
                    counts = sc
                lo = seg_offsets[m]
                hi = seg_offsets[m + 1]
                _walk(
                    counts,
                    ys[m],
                    lls[m],
                    brs[m],
                    sws[m],
                    cellss[m],
                    walks[m],
                    seg_starts[lo:hi],
                    seg_ties[lo : hi - 1],
                    seg_splits[m],
                    cell_bufs[t],
                    fam_bufs[t],
                    ov_bufs[t],
                    cell_pends[t],
                    fam_pends[t],
                    cell_flags[t],
                    fam_flags[t],
                )
                _finalize(
                    cell_bufs[t],
                    fam_bufs[t],
                    ov_bufs[t],
                    member,
                    auc_kind,
                    auc_src,
                    slots,
                    odds,
                    n_lanes,
                    b0,
                    m,
                    out,
                    value_bufs[t],
                )


# ----------------------------------------------------------------------------------------------
# Python side
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SliceBootstrap:
    """Point estimates and bootstrap replicates of every slice and complement.

    Attributes
    ----------
    point : ndarray of shape (n_models, n_slices, 2, n_metrics)
        On the full data
        ``[..., 0, :]`` the slice, ``[..., 1, :]`` its complement (the rest).
    replicates : ndarray of shape (n_resamples, n_models, n_slices, 2, n_metrics)
        The same on each resample
        NaN where undefined.
    """

    point: np.ndarray
    replicates: np.ndarray


class _Engine:
    """Prepared inputs of the numba kernel for a fixed plan, models and metrics."""

    def __init__(
        self,
        plan: SlicePlan,
        y: np.ndarray,
        scores: Sequence[np.ndarray],
        weight: np.ndarray | None,
        slots: np.ndarray,
        threshold: float,
        preference_threshold: float,
    ) -> None:
        n = y.shape[0]
        layout = _layout(plan)
        weight = np.ones(n) if weight is None else weight
        models = [prepare_model(y, r, weight, layout, plan.cell_codes, threshold) for r in scores]
        self.n = n
        self.n_models = len(models)
        self.n_slices = plan.n_slices
        self.n_cells = plan.n_cells
        self.n_walk = layout.n_walk
        self.n_metrics = slots.shape[0]
        self.orders = np.stack([m.order for m in models]).astype(np.int64)
        self.identity = np.asarray([bool(np.array_equal(m.order, np.arange(n))) for m in models])
        self.ys = np.stack([m.y for m in models])
        self.lls = np.stack([m.log_loss for m in models])
        self.brs = np.stack([m.brier for m in models])
        self.sws = np.stack([m.weight for m in models])
        self.cellss = np.stack([m.cells for m in models])
        self.walks = np.stack([m.walk for m in models])
        self.seg_starts = np.concatenate([m.seg_starts for m in models]).astype(np.int64)
        self.seg_ties = np.concatenate([np.append(m.seg_tie, False) for m in models]).astype(np.bool_)
        self.seg_splits = np.asarray([m.seg_split for m in models], dtype=np.int64)
        self.seg_offsets = np.concatenate(([0], np.cumsum([m.seg_starts.shape[0] for m in models]))).astype(np.int64)
        self.member = layout.member
        self.auc_kind = layout.auc_kind
        self.auc_src = layout.auc_src
        self.slots = np.ascontiguousarray(slots, dtype=np.int64)
        self.odds = preference_threshold / (1.0 - preference_threshold)

    def buffers(self, n_threads: int) -> tuple:
        t, n = n_threads, self.n
        gather = n if not self.identity.all() else 1
        walk = max(self.n_walk, 1)
        return (
            np.zeros((t, LANES, n), dtype=np.uint16),
            np.zeros((t, LANES, gather), dtype=np.uint16),
            np.zeros((t, self.n_cells * _CELL_STRIDE)),
            np.zeros((t, walk * _FAM_STRIDE)),
            np.zeros((t, 3, LANES)),
            np.zeros((t, self.n_cells * _FAM_STRIDE)),
            np.zeros((t, walk * _FAM_STRIDE)),
            np.zeros((t, self.n_cells), dtype=np.bool_),
            np.zeros((t, walk), dtype=np.bool_),
            np.zeros((t, N_METRIC_SLOTS)),
            np.zeros(t, dtype=np.bool_),
        )

    def run(self, indices: np.ndarray, out: np.ndarray, n_threads: int, buffers: tuple) -> None:
        _slice_kernel(
            indices,
            self.orders,
            self.identity,
            self.ys,
            self.lls,
            self.brs,
            self.sws,
            self.cellss,
            self.walks,
            self.seg_starts,
            self.seg_ties,
            self.seg_splits,
            self.seg_offsets,
            self.member,
            self.auc_kind,
            self.auc_src,
            self.slots,
            self.odds,
            n_threads,
            *buffers,
            out,
        )
        if buffers[-1].any():  # pragma: no cover - needs one row drawn 65,536 times in one resample
            raise RuntimeError("a bootstrap count exceeded 65,535; the slice kernel cannot represent it")


def default_batch_size(n: int, n_threads: int) -> int:
    """Resamples per batch: drawn indices of about 32 MB, a multiple of LANES x threads (>= 1 block each)."""
    unit = LANES * n_threads
    per = 4 * n
    k = max(1, (32 * 2**20) // (per * unit))
    return unit * k


def slice_point(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    *,
    slots: np.ndarray,
    threshold: float,
    preference_threshold: float,
) -> np.ndarray:
    """Point estimates only: shape (n_models, n_slices, 2, n_metrics) (every row counted once)."""
    engine = _Engine(plan, y, scores, weight, slots, threshold, preference_threshold)
    out = np.empty((1, engine.n_models, engine.n_slices, 2, engine.n_metrics))
    engine.run(np.arange(engine.n, dtype=np.int32)[None, :], out, 1, engine.buffers(1))
    return out[0]


def slice_bootstrap(
    plan: SlicePlan,
    y: np.ndarray,
    scores: Sequence[np.ndarray],
    weight: np.ndarray | None,
    *,
    slots: np.ndarray,
    threshold: float,
    preference_threshold: float,
    n_resamples: int,
    seed: np.random.SeedSequence,
    strata: np.ndarray | None = None,
    n_threads: int = 1,
    batch_size: int | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> SliceBootstrap:
    """Point estimates and paired bootstrap replicates of every slice and complement.

    Parameters
    ----------
    plan : SlicePlan
    y : ndarray of shape (n_rows,), float64
        Labels 0/1.
    scores : sequence of ndarray of shape (n_rows,), float64
        Each model's scores in [0, 1].
    weight : ndarray of shape (n_rows,) or None
        Sample weights (>= 0), or None for weight 1.
    slots : ndarray of int64
        :func:`disaggregated_eval.bootstrap.metric_slots` of the metrics to report.
    threshold, preference_threshold : float
    n_resamples : int
    seed : numpy.random.SeedSequence
        Resample ``i`` draws :func:`disaggregated_eval.bootstrap.resample_indices` with this seed.
    strata : ndarray of shape (n_rows,), optional
        Stratum codes of the ``within_group`` scheme (the cells)
        None for ``population``.
    n_threads : int
        numba threads of the kernel and threads of the index drawing.
    batch_size : int, optional
        Resamples per batch (results do not depend on it).
    progress : callable, optional
        ``progress(done, total)`` after each batch.

    Returns
    -------
    SliceBootstrap
    """
    engine = _Engine(plan, y, scores, weight, slots, threshold, preference_threshold)
    n = engine.n
    previous = numba.get_num_threads()
    numba.set_num_threads(n_threads)
    executor = ThreadPoolExecutor(max_workers=n_threads) if n_threads > 1 else None
    try:
        buffers = engine.buffers(n_threads)
        point = np.empty((1, engine.n_models, engine.n_slices, 2, engine.n_metrics))
        engine.run(np.arange(n, dtype=np.int32)[None, :], point, 1, buffers)
        replicates = np.empty((n_resamples, engine.n_models, engine.n_slices, 2, engine.n_metrics))
        batch = min(batch_size or default_batch_size(n, n_threads), n_resamples)
        buffer = np.empty((batch, n), dtype=np.int32)
        if progress is not None:
            progress(0, n_resamples)
        for start in range(0, n_resamples, batch):
            stop = min(start + batch, n_resamples)
            indices = _draw(n, seed, start, stop, strata, executor, n_threads, buffer)
            engine.run(indices, replicates[start:stop], n_threads, buffers)
            if progress is not None:
                progress(stop, n_resamples)
    finally:
        numba.set_num_threads(previous)
        if executor is not None:
            executor.shutdown()
    return SliceBootstrap(point=point[0], replicates=replicates)


def _draw(
    n: int,
    seed: np.random.SeedSequence,
    start: int,
    stop: int,
    strata: np.ndarray | None,
    executor: ThreadPoolExecutor | None,
    n_threads: int,
    buffer: np.ndarray,
) -> np.ndarray:
    """Indices of resamples start..stop-1 (the library engine's draws) into ``buffer``, split over threads."""
    count = stop - start
    out = buffer[:count]
    if executor is None or count < 2:
        return resample_indices(n, seed=seed, start=start, stop=stop, strata=strata, out=out)
    bounds = np.linspace(0, count, min(n_threads, count) + 1).astype(int)
    futures = [
        executor.submit(
            resample_indices, n, seed=seed, start=start + int(lo), stop=start + int(hi), strata=strata, out=out[lo:hi]
        )
        for lo, hi in itertools.pairwise(bounds)
        if hi > lo
    ]
    for future in futures:
        future.result()
    return out
