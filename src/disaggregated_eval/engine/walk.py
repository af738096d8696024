"""The walk: every weighted sum of every evaluation, in one pass over the rows in score order.

An *evaluation set* (:class:`WalkLayout`) holds, for each model, its rows sorted by score and a list
of *streams*. A stream is a weight column ``w`` (float64 per row) and, optionally, a code column
``c`` (an integer per row): the rows of code ``k`` form the stream's accumulator ``k``. So

* a weighted evaluation of all rows (the population metric, ``M_a`` with weights ``P(A = a | V)``)
  is a stream without codes (one accumulator);
* a family of slices (the levels of an attribute, the cells of an intersection, the subgroups of a
  controlled evaluation) is ONE stream with the family's codes: a row adds to one accumulator per
  family, not one per slice;
* a permutation test's two sides are two count vectors (lanes) of the same stream.

A stream may name a *universe* (the accumulator of all its rows, e.g. the overall population); its
accumulators then also collect the cross terms ``X1``, ``X2`` from which the walk derives the sums of
each accumulator's complement (the rest of the universe), the AUC included:

    with ``H(d) = 1[d > 0] + 1/2 1[d = 0]`` and ``N(s)`` the AUC numerator of ``s``,
    ``X1(s) = sum_{i pos in s} w_i sum_{j neg in U} w_j H(r_i - r_j)``,
    ``X2(s) = sum_{j neg in s} w_j sum_{i pos in U} w_i H(r_j - r_i)``, and
    ``N(U minus s) = N(U) - X1(s) - Wp(U) Wn(s) + X2(s) + N(s)``

(split the pairs of ``N(U)`` by whether each member is in ``s``; ``H(d) + H(-d) = 1``).

**What a row adds.** Per row ``j`` of a run of distinct scores, per stream, per resample (lane)
with ``w = count_j w_j`` and ``p = w y_j``, ``q = w - p``: ``AUC += p CN``, ``CP += p``,
``CN += q``, ``X1 += p CN(U)``, ``X2 += q CP(U)`` (universe values below ``j``), and ``w t_j`` for
each per-row term (:data:`.sums.ROW_TERMS`). A tie group (rows of equal score) is walked twice:
pass 1 collects each touched accumulator's group positives and negatives ``PG``, ``NG``; pass 2
flushes each once: ``AUC += PG (CN + NG / 2)``, ``X1 += PG (CN(U) + NG(U) / 2)``,
``X2 += NG (CP(U) + PG(U) / 2)``, universes last. At the start of the segment where the scores
reach a threshold the running ``CP`` and ``CN`` are copied: the false negatives and true negatives
at that threshold. This is the walk of every bootstrap, permutation test and point estimate of the
package, written once (:func:`_walk`).

**Parts.** Every sum but the AUC numerator is a sum over rows, so a slice's sums are the sums of
any partition of its rows: a stream whose codes are refined by another's (an attribute's levels by an
intersection's cells) walks, in a run of distinct scores, only its running negatives ``CN`` and
``AUC`` (two of its slots per row instead of all; a tie group is walked in full, as before), and after
the walk takes every sum but ``AUC`` from its parts (the same sums added in another order: equal to
rounding; ``CN`` too, so that a total and its part below a threshold are the same sums and their
difference is exactly 0 when nothing is predicted positive). A universe's ``CP``, ``CN`` and ``AUC``
are read by every row of its streams and stay walked (in registers when a model has one universe
without codes); it may take its per-row terms from parts (a coded stream in it, every code to its one
accumulator).

**Counts.** A walk reads, for ``LANES`` resamples at once, how often each row is counted: bootstrap
counts (from drawn row indices), permutation memberships (0/1), or 1 for point estimates. Rows with
the same values can be merged into one *unit* with a multiplicity (issue of compression; the walk
does not care).

**Outputs.** An output is an accumulator (``side`` 0) or its complement in its universe (``side``
1); the kernel writes every requested metric of every output for every resample through
:func:`.sums.metrics_from_sums`, for every threshold.

**Subsets.** A permutation test of a small slice in a large universe draws a few rows a permutation;
walking every row of the universe for each would cost the universe, not the draw.
:func:`run_subset_kernel` walks only the drawn rows of a one-stream layout (in score order, tie groups
flushed as above) and reads the universe's running positives and negatives below each tie group from a
table built once (:func:`subset_layout`), so that its sums, ``X1`` and ``X2`` included, are those the
walk gives the drawn rows as an accumulator of that universe; the metrics of the drawn rows and of the
rest of the universe then come from the same finalisation as the walk's outputs (side 0 and side 1).
A permutation then costs ``O(m log m)`` for ``m`` drawn rows instead of ``O(n)``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numba
import numpy as np

from .sums import N_METRIC_SLOTS, N_TERMS, TERM_SLOTS, metrics_from_sums, row_terms, score_segments

__all__ = [
    "LANES",
    "Stream",
    "ModelStreams",
    "WalkLayout",
    "build_layout",
    "run_kernel",
    "SubsetLayout",
    "subset_layout",
    "run_subset_kernel",
]

#: Resamples walked together: one pass over the rows (and their data) serves four resamples.
LANES = 4
#: Models with more dense streams than this walk them in a loop over the streams (vectorised), in row
#: chunks shared by the lanes; models with fewer unroll the four lanes per stream.
DENSE_LANE_MAX = 8
#: Rows per chunk of the many-stream loop (a chunk's weights stay in cache while every lane walks it).
WIDE_CHUNK = 256

# Accumulator slots: acc[k, slot, lane].
_CP, _CN, _AUC, _X1, _X2 = 0, 1, 2, 3, 4
_FIXED = 5  # then (FN, TN) per threshold, then the per-row terms


@dataclass(frozen=True)
class Stream:
    """One stream of a model's walk (module docstring).

    Attributes
    ----------
    weight : int
        Column of the model's weight matrix.
    codes : int
        Column of the model's code matrix, or -1 for a stream with one accumulator.
    n_codes : int
        Accumulators of the stream (1 without codes).
    universe : int
        Index (into the model's streams) of a one-accumulator stream over the same rows and
        weights whose accumulator is this stream's universe, or -1 (no complements).
    parts : int
        Index of a coded stream whose codes refine this stream's (an intersection's cells for an
        attribute's levels), with the same weight column and universe, or -1. The walk then keeps only
        this stream's running negatives and AUC numerator through runs of distinct scores, and every sum
        but the AUC numerator is then its parts' (module docstring, "Parts").
    part_codes : tuple of int
        With ``parts``: this stream's code of each code of the parts stream (-1 for a code without rows,
        which is then not added).

    A universe may have parts too: a coded stream whose universe it is, walked in full, with
    ``part_codes`` 0 (or -1) for every code. Its running positives, negatives and AUC numerator are read
    during the walk and stay walked; only its per-row terms are then its parts' (module docstring,
    "Parts").
    """

    weight: int
    codes: int = -1
    n_codes: int = 1
    universe: int = -1
    parts: int = -1
    part_codes: tuple[int, ...] = ()


@dataclass(frozen=True)
class ModelStreams:
    """One model's part of an evaluation set.

    Attributes
    ----------
    scores : ndarray of shape (n,), float64
        The model's scores in [0, 1] (original row order).
    weights : ndarray of shape (n, n_weight_columns), float64
        Weight columns (original row order), finite and >= 0.
    codes : ndarray of shape (n, n_code_columns), int32
        Code columns (original row order), ``0 .. n_codes - 1`` of the streams that use them.
    streams : tuple of Stream
    """

    scores: np.ndarray
    weights: np.ndarray
    codes: np.ndarray
    streams: tuple[Stream, ...]


@dataclass(frozen=True)
class WalkLayout:
    """Everything the kernel reads, for all models (flat arrays; built by :func:`build_layout`).

    ``n_outputs`` outputs per model, in the order of the model's streams and codes (side 0), then
    (side 1) the complements of the streams with a universe, again in stream and code order;
    :attr:`output_index` maps ``(model, stream, code, side)`` to the output's row.
    """

    n: int
    n_models: int
    n_thresholds: int
    terms: tuple[str, ...]
    order: np.ndarray  # (n_models, n) int64
    identity: np.ndarray  # (n_models,) bool: the model's score order is the rows' own order
    y: np.ndarray  # (n_models, n) float64, sorted
    term_values: np.ndarray  # (n_models, n_terms, n) float64, sorted
    term_slots: np.ndarray  # (n_terms,) int64: slot of each accumulated term in metrics_from_sums (a zero
    # term in slot 0 when no metric needs one: the walks fuse the first term into their main loop)
    seg_starts: np.ndarray  # flat int64
    seg_tie: np.ndarray  # flat bool (one extra False per model)
    seg_off: np.ndarray  # (n_models + 1,) int64
    splits: np.ndarray  # (n_models, n_thresholds) int64
    weights: np.ndarray  # flat float64: model m's (n, C_m) block of its coded streams' weight columns, score order
    w_off: np.ndarray  # (n_models + 1,)
    w_cols: np.ndarray  # (n_models,)
    codes: np.ndarray  # flat int32: model m's (n, D_m) block in score order
    c_off: np.ndarray
    c_cols: np.ndarray
    st_weight: np.ndarray  # flat int64 per stream: its column in the model's block of ``weights``
    st_code: np.ndarray
    st_acc: np.ndarray  # accumulator index of the stream's code 0 (within the model)
    st_univ: np.ndarray  # accumulator index of the universe or -1
    st_off: np.ndarray  # (n_models + 1,)
    n_acc: np.ndarray  # (n_models,) coded accumulators
    n_dense: np.ndarray  # (n_models,) dense streams
    dense_weights: np.ndarray  # flat float64: model m's (n, n_dense) block of dense weights in score order
    dw_off: np.ndarray  # (n_models + 1,)
    acc_univ: np.ndarray  # flat int64 per accumulator: its universe's accumulator or -1
    acc_is_univ: np.ndarray  # flat bool per accumulator
    a_off: np.ndarray  # (n_models + 1,)
    st_derived: np.ndarray  # flat int64 per stream: 0 walked in full, 1 every sum but AUC from its parts,
    # 2 (a universe) its per-row terms from its parts
    part_from: np.ndarray  # flat int64: accumulator (within the model) of each part ...
    part_to: np.ndarray  # ... the accumulator it adds into ...
    part_slot0: np.ndarray  # ... and the first slot added (every later one but the AUC numerator)
    p_off: np.ndarray  # (n_models + 1,)
    out_acc: np.ndarray  # flat int64 per output: accumulator (within the model)
    out_side: np.ndarray  # flat int64 per output: 0 coded accumulator, 1 its complement, 2 dense stream
    o_off: np.ndarray  # (n_models + 1,)
    output_index: dict

    @property
    def n_outputs(self) -> int:
        return int(self.o_off[-1])


def build_layout(
    y: np.ndarray,
    models: Sequence[ModelStreams],
    *,
    thresholds: Sequence[float],
    terms: Sequence[str],
    complements: bool = True,
) -> WalkLayout:
    """Sort each model's rows by score and lay out its streams for the kernel.

    Parameters
    ----------
    y : ndarray of shape (n,), float64
        Labels 0/1 (checked by the caller).
    models : sequence of ModelStreams
        Each model's scores, weight and code columns and streams (checked by the caller).
    thresholds : sequence of float
        Decision thresholds (increasing), each in (0, 1).
    terms : sequence of str
        Per-row terms to accumulate (:func:`.sums.terms_for`).
    complements : bool, default True
        Whether streams with a universe also output their complements (side 1).

    Returns
    -------
    WalkLayout

    Raises
    ------
    ValueError
        Without rows; for a universe or parts that do not fit the streams (:class:`Stream`).
    """
    n = y.shape[0]
    if n == 0:
        raise ValueError("build_layout needs at least one row; got none")
    thresholds = [float(t) for t in thresholds]
    orders, ys, tvs, starts, ties, splits = [], [], [], [], [], []
    wblocks, cblocks, w_cols, c_cols = [], [], [], []
    st_weight, st_code, st_acc, st_univ, n_acc, acc_univ, acc_is_univ = [], [], [], [], [], [], []
    st_derived, part_from, part_to, part_slot0, p_off = [], [], [], [], [0]
    first_term_slot = _FIXED + 2 * len(thresholds)
    dense_cols, n_dense, dw_blocks, dw_off = [], [], [], [0]
    out_acc, out_side = [], []
    seg_off, w_off, c_off, st_off, a_off, o_off = [0], [0], [0], [0], [0], [0]
    output_index: dict[tuple[int, int, int, int], int] = {}
    for m, model in enumerate(models):
        r = model.scores
        order = np.argsort(r, kind="stable")
        r_sorted = r[order]
        seg, tie, split = score_segments(r_sorted, thresholds)
        orders.append(order.astype(np.int64))
        ys.append(y[order])
        # At least one term row (zeros when no metric needs a term): the walks fuse the first term.
        tvs.append(row_terms(y, r, terms)[:, order] if terms else np.zeros((1, n)))
        starts.append(seg)
        ties.append(np.append(tie, False))
        splits.append(split)
        seg_off.append(seg_off[-1] + seg.shape[0])
        weights = np.asarray(model.weights, dtype=np.float64).reshape(n, -1)
        codes = np.asarray(model.codes, dtype=np.int32).reshape(n, -1)
        cblocks.append(np.ascontiguousarray(codes[order]).ravel())
        c_cols.append(codes.shape[1])
        c_off.append(c_off[-1] + codes.size)
        # Streams without codes or universe that no other stream reads ("dense": the library's
        # weighted evaluations) are walked in a loop vectorised over them; the others ("coded":
        # families of slices and their universes) scatter into accumulators by code.
        referenced = {s.universe for s in model.streams if s.universe >= 0}
        dense = [s for s, st in enumerate(model.streams) if st.codes < 0 and st.universe < 0 and s not in referenced]
        coded = [s for s in range(len(model.streams)) if s not in dense]
        for s in dense:
            if model.streams[s].parts >= 0:
                raise ValueError(f"stream {s}: a stream without codes takes parts only as a universe")
        dense_index = {s: i for i, s in enumerate(dense)}
        first_acc: dict[int, int] = {}
        total = 0
        for s in coded:
            first_acc[s] = total
            total += model.streams[s].n_codes
        # The coded streams' weight columns only (the dense ones are laid out below, once).
        coded_cols = sorted({model.streams[s].weight for s in coded})
        column_of = {c: j for j, c in enumerate(coded_cols)}
        wblocks.append(_sorted_columns(weights, order, coded_cols))
        w_cols.append(len(coded_cols))
        w_off.append(w_off[-1] + wblocks[-1].size)
        is_univ = np.zeros(total, dtype=np.bool_)
        per_acc_univ = np.full(total, -1, dtype=np.int64)
        for s in coded:
            stream = model.streams[s]
            if stream.universe >= 0:
                u = model.streams[stream.universe]
                if u.n_codes != 1 or u.universe >= 0 or u.weight != stream.weight:
                    raise ValueError("a universe must be a one-accumulator stream with the same weight column")
                is_univ[first_acc[stream.universe]] = True
                per_acc_univ[first_acc[s] : first_acc[s] + stream.n_codes] = first_acc[stream.universe]
        # Row updates read a universe's running sums below the row: universes are updated last.
        for s in sorted(coded, key=lambda s: bool(is_univ[first_acc[s]])):
            stream = model.streams[s]
            st_weight.append(column_of[stream.weight])
            st_code.append(stream.codes)
            st_acc.append(first_acc[s])
            st_univ.append(per_acc_univ[first_acc[s]] if stream.universe >= 0 else -1)
            universe_parts = stream.parts >= 0 and s in referenced
            st_derived.append(0 if stream.parts < 0 else 2 if universe_parts else 1)
            if stream.parts >= 0:
                _check_parts(model, s, stream, universe_parts)
                for j, k in enumerate(stream.part_codes):
                    if k >= 0:  # -1: a part without rows
                        part_from.append(first_acc[stream.parts] + j)
                        part_to.append(first_acc[s] + k)
                        part_slot0.append(first_term_slot if universe_parts else 0)
        st_off.append(st_off[-1] + len(coded))
        p_off.append(len(part_from))
        dense_cols.append(np.asarray([model.streams[s].weight for s in dense], dtype=np.int64))
        n_acc.append(total)
        n_dense.append(len(dense))
        acc_univ.append(per_acc_univ)
        acc_is_univ.append(is_univ)
        a_off.append(a_off[-1] + total)
        local = 0
        for side in (0, 1):
            for s, stream in enumerate(model.streams):
                if side == 1 and (stream.universe < 0 or not complements):
                    continue
                for k in range(stream.n_codes):
                    output_index[(m, s, k, side)] = o_off[-1] + local
                    if s in dense_index:
                        out_acc.append(dense_index[s])
                        out_side.append(2)  # a dense accumulator
                    else:
                        out_acc.append(first_acc[s] + k)
                        out_side.append(side)
                    local += 1
        o_off.append(o_off[-1] + local)
        dw_blocks.append(_sorted_columns(weights, order, dense_cols[-1]))
        dw_off.append(dw_off[-1] + dw_blocks[-1].size)
    n_terms = max(1, len(terms))
    i64 = np.int64
    return WalkLayout(
        n=n,
        n_models=len(models),
        n_thresholds=len(thresholds),
        terms=tuple(terms),
        order=np.ascontiguousarray(np.stack(orders)),
        identity=np.asarray([bool(np.array_equal(o, np.arange(n))) for o in orders], dtype=np.bool_),
        y=np.ascontiguousarray(np.stack(ys), dtype=np.float64),
        term_values=np.ascontiguousarray(np.stack(tvs).reshape(len(models), n_terms, n), dtype=np.float64),
        term_slots=np.asarray([TERM_SLOTS[t] for t in terms] if terms else [0], dtype=i64),
        seg_starts=np.concatenate(starts).astype(i64),
        seg_tie=np.concatenate(ties).astype(np.bool_),
        seg_off=np.asarray(seg_off, dtype=i64),
        splits=np.ascontiguousarray(np.stack(splits), dtype=i64),
        weights=_joined(wblocks, np.float64),
        w_off=np.asarray(w_off, dtype=i64),
        w_cols=np.asarray(w_cols, dtype=i64),
        codes=_joined(cblocks, np.int32),
        c_off=np.asarray(c_off, dtype=i64),
        c_cols=np.asarray(c_cols, dtype=i64),
        st_weight=np.asarray(st_weight, dtype=i64),
        st_code=np.asarray(st_code, dtype=i64),
        st_acc=np.asarray(st_acc, dtype=i64),
        st_univ=np.asarray(st_univ, dtype=i64),
        st_off=np.asarray(st_off, dtype=i64),
        n_acc=np.asarray(n_acc, dtype=i64),
        n_dense=np.asarray(n_dense, dtype=i64),
        dense_weights=_joined(dw_blocks, np.float64),
        dw_off=np.asarray(dw_off, dtype=i64),
        acc_univ=np.concatenate(acc_univ).astype(i64),
        acc_is_univ=np.concatenate(acc_is_univ).astype(np.bool_),
        a_off=np.asarray(a_off, dtype=i64),
        st_derived=np.asarray(st_derived, dtype=i64),
        part_from=np.asarray(part_from, dtype=i64),
        part_to=np.asarray(part_to, dtype=i64),
        part_slot0=np.asarray(part_slot0, dtype=i64),
        p_off=np.asarray(p_off, dtype=i64),
        out_acc=np.asarray(out_acc, dtype=i64),
        out_side=np.asarray(out_side, dtype=i64),
        o_off=np.asarray(o_off, dtype=i64),
        output_index=output_index,
    )


def _sorted_columns(matrix: np.ndarray, order: np.ndarray, columns) -> np.ndarray:
    """``matrix[order][:, columns]`` flattened, made in one allocation (no sorted copy of every column)."""
    return matrix[np.ix_(order, np.asarray(columns, dtype=np.int64))].ravel()


def _joined(blocks: list[np.ndarray], dtype) -> np.ndarray:
    """The models' blocks end to end, contiguous; one model's block as it is (no copy of the largest arrays)."""
    if len(blocks) == 1:
        return np.ascontiguousarray(blocks[0], dtype=dtype)
    return np.ascontiguousarray(np.concatenate(blocks), dtype=dtype)


def _check_parts(model: ModelStreams, s: int, stream: Stream, universe: bool) -> None:
    """A stream's parts: a fully walked coded stream, same weight and universe, that refines its codes.

    A universe's parts: a fully walked coded stream whose universe it is, all of whose codes map to 0.
    """
    if not 0 <= stream.parts < len(model.streams) or stream.parts == s or (stream.codes < 0 and not universe):
        raise ValueError(f"stream {s}: parts must name another stream of the model; got {stream.parts}")
    part = model.streams[stream.parts]
    if universe:
        mapping = np.asarray(stream.part_codes, dtype=np.int64)
        if part.codes < 0 or part.parts >= 0 or part.universe != s:
            raise ValueError(f"stream {s} is a universe: its parts must be a coded stream without parts in it")
        if mapping.shape != (part.n_codes,) or not np.isin(mapping, (-1, 0)).all():
            raise ValueError(f"stream {s} is a universe: part_codes must be 0 (or -1) for each code of its parts")
        if (mapping[np.asarray(model.codes[:, part.codes], dtype=np.int64)] != 0).any():
            raise ValueError(f"stream {s} is a universe: part_codes give -1 to a code of its parts that has rows")
        return
    if part.codes < 0 or part.parts >= 0 or part.weight != stream.weight or part.universe != stream.universe:
        raise ValueError(f"stream {s}: its parts must be a coded stream without parts, with its weight and universe")
    mapping = np.asarray(stream.part_codes, dtype=np.int64)
    if mapping.shape != (part.n_codes,) or (mapping.size and (mapping.min() < -1 or mapping.max() >= stream.n_codes)):
        raise ValueError(
            f"stream {s}: part_codes must give one of its {stream.n_codes} codes (or -1 for a part without rows) "
            "per code of its parts"
        )
    fine = np.asarray(model.codes[:, part.codes], dtype=np.int64)
    if not np.array_equal(mapping[fine], np.asarray(model.codes[:, stream.codes], dtype=np.int64)):
        raise ValueError(f"stream {s}: the codes of its parts do not refine its codes as part_codes says")


# ----------------------------------------------------------------------------------------------
# numba kernels
# ----------------------------------------------------------------------------------------------


@numba.njit(cache=True)
def _walk(cs, y, tv, seg_starts, seg_tie, splits, W, n_w, C, n_c, st_w, st_c, st_a, st_u, st_d, a_univ, a_isu,
          p_from, p_to, p_slot0, acc, pend, flag, touched, Wd, n_d, accd, pendd, accw, pendw):  # fmt: skip
    """One model's walk for LANES count vectors ``cs[j, lane]`` (rows in score order); module docstring.

    Coded streams: ``W`` (flat, ``n_w`` weight columns) and ``C`` (flat, ``n_c`` code columns) in
    score order; streams ``st_*`` in update order (universes last); ``a_univ``, ``a_isu`` each
    accumulator's universe (or -1) and whether it is one; accumulators ``acc[k, slot, lane]``.
    Dense streams: ``Wd`` (flat, ``n_d`` columns), accumulators ``accd[s, slot, lane]`` (no code
    look-up, the four lanes unrolled). Both are zeroed here; ``pend``, ``pendd``, ``flag``, ``touched``
    are scratch for the tie groups (left zeroed). Streams with ``st_d`` have parts: accumulator
    ``p_from[i]`` adds into ``p_to[i]`` after the walk (slots ``p_slot0[i]`` on but the AUC numerator;
    ``st_d`` 1: all of them, 2, a universe: its per-row terms).
    """
    n_streams = st_w.shape[0]
    n_terms = tv.shape[0]
    n_thr = splits.shape[0]
    t0 = _FIXED + 2 * n_thr
    acc[:] = 0.0
    accd[:] = 0.0
    accw[:] = 0.0
    n_seg = seg_starts.shape[0] - 1
    # A model with one universe (updated last) without codes, as an audit's whole population: through runs
    # of distinct scores its running positives, negatives and AUC numerator stay in registers, and its
    # per-row terms are walked only if it does not take them from parts (st_d 2).
    n_univ = 0
    for s in range(n_streams):
        if a_isu[st_a[s]]:
            n_univ += 1
    last = max(n_streams - 1, 0)
    reg_u = n_univ == 1 and a_isu[st_a[last]] and st_c[last] < 0  # n_univ 1: n_streams >= 1
    ku = st_a[last] if reg_u else 0
    wu = st_w[last] if reg_u else 0
    n_terms_u = n_terms if reg_u and st_d[last] == 0 else 0
    n_walked = n_streams - 1 if reg_u else n_streams  # streams walked in memory
    # ---- dense streams, few: one pass per stream, the four lanes' sums in registers ----
    if 0 < n_d <= DENSE_LANE_MAX:
        two_terms = n_terms > 1
        for s in range(n_d):
            cp0 = 0.0
            cp1 = 0.0
            cp2 = 0.0
            cp3 = 0.0
            cn0 = 0.0
            cn1 = 0.0
            cn2 = 0.0
            cn3 = 0.0
            au0 = 0.0
            au1 = 0.0
            au2 = 0.0
            au3 = 0.0
            # the first two per-row terms in registers (the second only when requested); others in memory
            t00 = 0.0
            t01 = 0.0
            t02 = 0.0
            t03 = 0.0
            t10 = 0.0
            t11 = 0.0
            t12 = 0.0
            t13 = 0.0
            a = accd[s]
            for seg in range(n_seg + 1):
                for t in range(n_thr):
                    if splits[t] == seg:
                        f = _FIXED + 2 * t
                        a[f, 0] = cp0
                        a[f, 1] = cp1
                        a[f, 2] = cp2
                        a[f, 3] = cp3
                        a[f + 1, 0] = cn0
                        a[f + 1, 1] = cn1
                        a[f + 1, 2] = cn2
                        a[f + 1, 3] = cn3
                if seg == n_seg:
                    break
                start = seg_starts[seg]
                stop = seg_starts[seg + 1]
                pg0 = 0.0
                pg1 = 0.0
                pg2 = 0.0
                pg3 = 0.0
                ng0 = 0.0
                ng1 = 0.0
                ng2 = 0.0
                ng3 = 0.0
                tie = seg_tie[seg]
                if not tie:
                    for j in range(start, stop):
                        wv = Wd[j * n_d + s]
                        yj = y[j]
                        v = tv[0, j]
                        w0 = cs[j, 0] * wv
                        w1 = cs[j, 1] * wv
                        w2 = cs[j, 2] * wv
                        w3 = cs[j, 3] * wv
                        p0 = w0 * yj
                        p1 = w1 * yj
                        p2 = w2 * yj
                        p3 = w3 * yj
                        au0 += p0 * cn0
                        au1 += p1 * cn1
                        au2 += p2 * cn2
                        au3 += p3 * cn3
                        cp0 += p0
                        cp1 += p1
                        cp2 += p2
                        cp3 += p3
                        cn0 += w0 - p0
                        cn1 += w1 - p1
                        cn2 += w2 - p2
                        cn3 += w3 - p3
                        t00 += w0 * v
                        t01 += w1 * v
                        t02 += w2 * v
                        t03 += w3 * v
                        if two_terms:
                            v = tv[1, j]
                            t10 += w0 * v
                            t11 += w1 * v
                            t12 += w2 * v
                            t13 += w3 * v
                else:
                    for j in range(start, stop):
                        wv = Wd[j * n_d + s]
                        yj = y[j]
                        v = tv[0, j]
                        w0 = cs[j, 0] * wv
                        w1 = cs[j, 1] * wv
                        w2 = cs[j, 2] * wv
                        w3 = cs[j, 3] * wv
                        p0 = w0 * yj
                        p1 = w1 * yj
                        p2 = w2 * yj
                        p3 = w3 * yj
                        pg0 += p0
                        pg1 += p1
                        pg2 += p2
                        pg3 += p3
                        ng0 += w0 - p0
                        ng1 += w1 - p1
                        ng2 += w2 - p2
                        ng3 += w3 - p3
                        t00 += w0 * v
                        t01 += w1 * v
                        t02 += w2 * v
                        t03 += w3 * v
                        if two_terms:
                            v = tv[1, j]
                            t10 += w0 * v
                            t11 += w1 * v
                            t12 += w2 * v
                            t13 += w3 * v
                if n_terms > 2:
                    for j in range(start, stop):
                        wv = Wd[j * n_d + s]
                        w0 = cs[j, 0] * wv
                        w1 = cs[j, 1] * wv
                        w2 = cs[j, 2] * wv
                        w3 = cs[j, 3] * wv
                        for t in range(2, n_terms):
                            v = tv[t, j]
                            a[t0 + t, 0] += w0 * v
                            a[t0 + t, 1] += w1 * v
                            a[t0 + t, 2] += w2 * v
                            a[t0 + t, 3] += w3 * v
                if tie:
                    au0 += pg0 * (cn0 + 0.5 * ng0)
                    au1 += pg1 * (cn1 + 0.5 * ng1)
                    au2 += pg2 * (cn2 + 0.5 * ng2)
                    au3 += pg3 * (cn3 + 0.5 * ng3)
                    cp0 += pg0
                    cp1 += pg1
                    cp2 += pg2
                    cp3 += pg3
                    cn0 += ng0
                    cn1 += ng1
                    cn2 += ng2
                    cn3 += ng3
            a[_CP, 0] = cp0
            a[_CP, 1] = cp1
            a[_CP, 2] = cp2
            a[_CP, 3] = cp3
            a[_CN, 0] = cn0
            a[_CN, 1] = cn1
            a[_CN, 2] = cn2
            a[_CN, 3] = cn3
            a[_AUC, 0] = au0
            a[_AUC, 1] = au1
            a[_AUC, 2] = au2
            a[_AUC, 3] = au3
            a[t0, 0] = t00
            a[t0, 1] = t01
            a[t0, 2] = t02
            a[t0, 3] = t03
            if two_terms:
                a[t0 + 1, 0] = t10
                a[t0 + 1, 1] = t11
                a[t0 + 1, 2] = t12
                a[t0 + 1, 3] = t13
    # ---- coded streams, and many dense streams: one pass over the rows for all of them ----
    for seg in range(n_seg + 1):
        for t in range(n_thr):
            if splits[t] == seg:
                for k in range(acc.shape[0]):
                    for lane in range(LANES):
                        acc[k, _FIXED + 2 * t, lane] = acc[k, _CP, lane]
                        acc[k, _FIXED + 2 * t + 1, lane] = acc[k, _CN, lane]
                for lane in range(LANES):
                    for s in range(n_d):
                        accw[_FIXED + 2 * t, lane, s] = accw[_CP, lane, s]
                        accw[_FIXED + 2 * t + 1, lane, s] = accw[_CN, lane, s]
        if seg == n_seg:
            break
        start = seg_starts[seg]
        stop = seg_starts[seg + 1]
        tie = seg_tie[seg]
        # ---- dense streams, many: accumulators accw[slot, lane, s], the inner loop over streams ----
        if n_d > DENSE_LANE_MAX:
            if not tie:
                for chunk in range(start, stop, WIDE_CHUNK):
                    chunk_stop = min(chunk + WIDE_CHUNK, stop)
                    for lane in range(LANES):
                        au = accw[_AUC, lane]
                        cp = accw[_CP, lane]
                        cn = accw[_CN, lane]
                        tt0 = accw[t0, lane]
                        tt1 = accw[t0 + min(1, n_terms - 1), lane]
                        for j in range(chunk, chunk_stop):
                            c = cs[j, lane]
                            yj = y[j]
                            v0 = tv[0, j]
                            row = j * n_d
                            for s in range(n_d):
                                w = c * Wd[row + s]
                                p = w * yj
                                au[s] += p * cn[s]
                                cp[s] += p
                                cn[s] += w - p
                                tt0[s] += w * v0
                            if n_terms > 1:
                                v1 = tv[1, j]
                                for s in range(n_d):
                                    tt1[s] += c * Wd[row + s] * v1
                            for t in range(2, n_terms):
                                tt = accw[t0 + t, lane]
                                v = tv[t, j]
                                for s in range(n_d):
                                    tt[s] += c * Wd[row + s] * v
            else:
                for lane in range(LANES):
                    pg = pendw[0, lane]
                    ng = pendw[1, lane]
                    for j in range(start, stop):
                        c = cs[j, lane]
                        yj = y[j]
                        row = j * n_d
                        tt0 = accw[t0, lane]
                        v0 = tv[0, j]
                        for s in range(n_d):
                            w = c * Wd[row + s]
                            p = w * yj
                            pg[s] += p
                            ng[s] += w - p
                            tt0[s] += w * v0
                        for t in range(1, n_terms):
                            tt = accw[t0 + t, lane]
                            v = tv[t, j]
                            for s in range(n_d):
                                tt[s] += c * Wd[row + s] * v
                    au = accw[_AUC, lane]
                    cp = accw[_CP, lane]
                    cn = accw[_CN, lane]
                    for s in range(n_d):
                        au[s] += pg[s] * (cn[s] + 0.5 * ng[s])
                        cp[s] += pg[s]
                        cn[s] += ng[s]
                        pg[s] = 0.0
                        ng[s] = 0.0
        # ---- coded streams ----
        if n_streams == 0:
            continue
        if not tie:
            # the one universe's running positives P, negatives N and AUC numerator A in registers (reg_u)
            P0 = P1 = P2 = P3 = N0 = N1 = N2 = N3 = A0 = A1 = A2 = A3 = 0.0
            if reg_u:
                P0, P1, P2, P3 = acc[ku, _CP, 0], acc[ku, _CP, 1], acc[ku, _CP, 2], acc[ku, _CP, 3]
                N0, N1, N2, N3 = acc[ku, _CN, 0], acc[ku, _CN, 1], acc[ku, _CN, 2], acc[ku, _CN, 3]
                A0, A1, A2, A3 = acc[ku, _AUC, 0], acc[ku, _AUC, 1], acc[ku, _AUC, 2], acc[ku, _AUC, 3]
            for j in range(start, stop):
                yj = y[j]
                c0 = cs[j, 0]
                c1 = cs[j, 1]
                c2 = cs[j, 2]
                c3 = cs[j, 3]
                for s in range(n_walked):
                    wv = W[j * n_w + st_w[s]]
                    k = st_a[s]
                    if st_c[s] >= 0:
                        k += C[j * n_c + st_c[s]]
                    w0 = c0 * wv
                    w1 = c1 * wv
                    w2 = c2 * wv
                    w3 = c3 * wv
                    p0 = w0 * yj
                    p1 = w1 * yj
                    p2 = w2 * yj
                    p3 = w3 * yj
                    full = st_d[s] != 1  # a stream with parts walks only its AUC numerator and CN
                    u = st_u[s]
                    if full and u >= 0:
                        if reg_u:  # u is ku
                            acc[k, _X1, 0] += p0 * N0
                            acc[k, _X1, 1] += p1 * N1
                            acc[k, _X1, 2] += p2 * N2
                            acc[k, _X1, 3] += p3 * N3
                            acc[k, _X2, 0] += (w0 - p0) * P0
                            acc[k, _X2, 1] += (w1 - p1) * P1
                            acc[k, _X2, 2] += (w2 - p2) * P2
                            acc[k, _X2, 3] += (w3 - p3) * P3
                        else:
                            acc[k, _X1, 0] += p0 * acc[u, _CN, 0]
                            acc[k, _X1, 1] += p1 * acc[u, _CN, 1]
                            acc[k, _X1, 2] += p2 * acc[u, _CN, 2]
                            acc[k, _X1, 3] += p3 * acc[u, _CN, 3]
                            acc[k, _X2, 0] += (w0 - p0) * acc[u, _CP, 0]
                            acc[k, _X2, 1] += (w1 - p1) * acc[u, _CP, 1]
                            acc[k, _X2, 2] += (w2 - p2) * acc[u, _CP, 2]
                            acc[k, _X2, 3] += (w3 - p3) * acc[u, _CP, 3]
                    n0 = acc[k, _CN, 0]
                    n1 = acc[k, _CN, 1]
                    n2 = acc[k, _CN, 2]
                    n3 = acc[k, _CN, 3]
                    acc[k, _AUC, 0] += p0 * n0
                    acc[k, _AUC, 1] += p1 * n1
                    acc[k, _AUC, 2] += p2 * n2
                    acc[k, _AUC, 3] += p3 * n3
                    acc[k, _CN, 0] = n0 + (w0 - p0)
                    acc[k, _CN, 1] = n1 + (w1 - p1)
                    acc[k, _CN, 2] = n2 + (w2 - p2)
                    acc[k, _CN, 3] = n3 + (w3 - p3)
                    if not full:
                        continue
                    acc[k, _CP, 0] += p0
                    acc[k, _CP, 1] += p1
                    acc[k, _CP, 2] += p2
                    acc[k, _CP, 3] += p3
                    for t in range(n_terms if st_d[s] == 0 else 0):
                        v = tv[t, j]
                        acc[k, t0 + t, 0] += w0 * v
                        acc[k, t0 + t, 1] += w1 * v
                        acc[k, t0 + t, 2] += w2 * v
                        acc[k, t0 + t, 3] += w3 * v
                if not reg_u:
                    continue
                wv = W[j * n_w + wu]
                w0 = c0 * wv
                w1 = c1 * wv
                w2 = c2 * wv
                w3 = c3 * wv
                p0 = w0 * yj
                p1 = w1 * yj
                p2 = w2 * yj
                p3 = w3 * yj
                A0 += p0 * N0
                A1 += p1 * N1
                A2 += p2 * N2
                A3 += p3 * N3
                P0 += p0
                P1 += p1
                P2 += p2
                P3 += p3
                N0 += w0 - p0
                N1 += w1 - p1
                N2 += w2 - p2
                N3 += w3 - p3
                for t in range(n_terms_u):
                    v = tv[t, j]
                    acc[ku, t0 + t, 0] += w0 * v
                    acc[ku, t0 + t, 1] += w1 * v
                    acc[ku, t0 + t, 2] += w2 * v
                    acc[ku, t0 + t, 3] += w3 * v
            if reg_u:
                acc[ku, _CP, 0], acc[ku, _CP, 1], acc[ku, _CP, 2], acc[ku, _CP, 3] = P0, P1, P2, P3
                acc[ku, _CN, 0], acc[ku, _CN, 1], acc[ku, _CN, 2], acc[ku, _CN, 3] = N0, N1, N2, N3
                acc[ku, _AUC, 0], acc[ku, _AUC, 1], acc[ku, _AUC, 2], acc[ku, _AUC, 3] = A0, A1, A2, A3
        else:
            # pass 1: the group's positives and negatives per touched accumulator
            n_touched = 0
            for j in range(start, stop):
                yj = y[j]
                for s in range(n_streams):
                    wv = W[j * n_w + st_w[s]]
                    k = st_a[s]
                    if st_c[s] >= 0:
                        k += C[j * n_c + st_c[s]]
                    if not flag[k]:
                        flag[k] = True
                        touched[n_touched] = k
                        n_touched += 1
                    for lane in range(LANES):
                        w = cs[j, lane] * wv
                        p = w * yj
                        pend[k, 0, lane] += p
                        pend[k, 1, lane] += w - p
                    for t in range(n_terms):
                        v = tv[t, j]
                        for lane in range(LANES):
                            acc[k, t0 + t, lane] += cs[j, lane] * wv * v
            # pass 2: flush every touched accumulator once; universes after those that read them
            for phase in range(2):
                for i in range(n_touched):
                    k = touched[i]
                    if a_isu[k] != (phase == 1):
                        continue
                    u = a_univ[k]
                    for lane in range(LANES):
                        pg = pend[k, 0, lane]
                        ng = pend[k, 1, lane]
                        if u >= 0:
                            acc[k, _X1, lane] += pg * (acc[u, _CN, lane] + 0.5 * pend[u, 1, lane])
                            acc[k, _X2, lane] += ng * (acc[u, _CP, lane] + 0.5 * pend[u, 0, lane])
                        acc[k, _AUC, lane] += pg * (acc[k, _CN, lane] + 0.5 * ng)
                        acc[k, _CP, lane] += pg
                        acc[k, _CN, lane] += ng
            for i in range(n_touched):
                k = touched[i]
                flag[k] = False
                for lane in range(LANES):
                    pend[k, 0, lane] = 0.0
                    pend[k, 1, lane] = 0.0
    if n_d > DENSE_LANE_MAX:
        for s in range(n_d):
            for slot in range(accw.shape[0]):
                for lane in range(LANES):
                    accd[s, slot, lane] = accw[slot, lane, s]
    # ---- accumulators with parts: every sum but the AUC numerator from their parts (also the total of
    # negatives, whose running value served the AUC: the metrics subtract the negatives below a threshold
    # from it, and both must be the same sums for "no predicted positive" to give exactly 0) ----
    n_slots = acc.shape[1]
    for i in range(p_to.shape[0]):
        for slot in range(p_slot0[i], n_slots):
            if slot != _AUC:
                for lane in range(LANES):
                    acc[p_to[i], slot, lane] = 0.0
    for i in range(p_to.shape[0]):
        for slot in range(p_slot0[i], n_slots):
            if slot != _AUC:
                for lane in range(LANES):
                    acc[p_to[i], slot, lane] += acc[p_from[i], slot, lane]


#: A complement's sum is its universe's minus its accumulator's: the same rows added in two orders. A
#: difference within this share of the two sums is rounding (a weighted running sum of n rows is off by
#: at most about n x 1.1e-16 of its value; 1e-9 covers ten million rows) and is taken as 0: a rest with
#: no predicted positive then has an undefined precision and a predicted positive rate of exactly 0.
REST_ROUNDING = 1e-9


@numba.njit(cache=True, inline="always")
def _rest(total, part):
    """``total - part`` of a complement's sum, 0 where it is within :data:`REST_ROUNDING` of rounding."""
    d = total - part
    return 0.0 if abs(d) <= REST_ROUNDING * (abs(total) + abs(part)) else d


@numba.njit(cache=True)
def _finalize(acc, accd, n_lanes, out_acc, out_side, a_univ, n_thr, term_slots, slots, odds, out, b0, o0, terms,
              values):  # fmt: skip
    """Metrics of every output of one model for each lane, into ``out[b0 + lane, o0 + o, h, q]``."""
    n_out = out_acc.shape[0]
    n_terms = term_slots.shape[0]
    n_q = slots.shape[0]
    t0 = _FIXED + 2 * n_thr
    for lane in range(n_lanes):
        for o in range(n_out):
            k = out_acc[o]
            side = out_side[o]
            u = -1
            if side == 2:
                wp = accd[k, _CP, lane]
                wn = accd[k, _CN, lane]
                auc = accd[k, _AUC, lane]
                for t in range(n_terms):
                    terms[term_slots[t]] = accd[k, t0 + t, lane]
            elif side == 0:
                wp = acc[k, _CP, lane]
                wn = acc[k, _CN, lane]
                auc = acc[k, _AUC, lane]
                for t in range(n_terms):
                    terms[term_slots[t]] = acc[k, t0 + t, lane]
            else:
                u = a_univ[k]
                wp = _rest(acc[u, _CP, lane], acc[k, _CP, lane])
                wn = _rest(acc[u, _CN, lane], acc[k, _CN, lane])
                # N(U minus s) = N(U) - X1(s) - Wp(U) Wn(s) + X2(s) + N(s)  (module docstring)
                auc = (
                    acc[u, _AUC, lane]
                    - acc[k, _X1, lane]
                    - acc[u, _CP, lane] * acc[k, _CN, lane]
                    + acc[k, _X2, lane]
                    + acc[k, _AUC, lane]
                )
                for t in range(n_terms):
                    terms[term_slots[t]] = acc[u, t0 + t, lane] - acc[k, t0 + t, lane]
            for h in range(n_thr):
                f = _FIXED + 2 * h
                if side == 2:
                    fn = accd[k, f, lane]
                    tn = accd[k, f + 1, lane]
                elif side == 0:
                    fn = acc[k, f, lane]
                    tn = acc[k, f + 1, lane]
                else:
                    # the rest's true and false positives, so that "none predicted positive" is exactly 0
                    fn = wp - _rest(acc[u, _CP, lane] - acc[u, f, lane], acc[k, _CP, lane] - acc[k, f, lane])
                    tn = wn - _rest(acc[u, _CN, lane] - acc[u, f + 1, lane], acc[k, _CN, lane] - acc[k, f + 1, lane])
                metrics_from_sums(wp, wn, fn, tn, auc, terms, odds, values)
                for q in range(n_q):
                    out[b0 + lane, o0 + o, h, q] = values[slots[q]]


@numba.njit(parallel=True, cache=True)
def _kernel(draws, from_counts, order, identity, y, tv, term_slots, seg_starts, seg_tie, seg_off, splits,
            weights, w_off, w_cols, codes, c_off, c_cols, st_weight, st_code, st_acc, st_univ, st_derived, st_off,
            n_acc, acc_univ, acc_is_univ, a_off, part_from, part_to, part_slot0, p_off, dense_weights, dw_off,
            n_dense, out_acc, out_side, o_off, slots, odds, n_threads, out):  # fmt: skip
    """Metrics of every output for a batch of resamples; blocks of LANES resamples, block ``b`` by
    thread ``b % n_threads`` (a fixed schedule: results do not depend on the thread count).

    ``draws`` (B, n): drawn row indices (``from_counts`` False: counts are their tallies) or the
    counts of every row or unit themselves (``from_counts`` True).
    """
    n_batch, n = draws.shape
    n_models = order.shape[0]
    n_blocks = (n_batch + LANES - 1) // LANES
    n_thr = splits.shape[1]
    n_slots = _FIXED + 2 * n_thr + tv.shape[1]
    max_acc = 1
    max_dense = 1
    for m in range(n_models):
        max_acc = max(max_acc, n_acc[m])
        max_dense = max(max_dense, n_dense[m])
    gather = False  # a model whose score order is not the rows' own order reads its counts gathered
    for m in range(n_models):
        if not identity[m]:
            gather = True
    for th in numba.prange(n_threads):
        # counts of each row in the block's resamples; float32 is exact for counts below 2**24
        # lane-major: each resample's counts are one contiguous row (the scatter of its draws stays in a
        # quarter of the memory); the walk reads them through the transposed view, cs[j, lane]
        counts = np.zeros((LANES, n), dtype=np.float32)
        cs = np.zeros((LANES, n if gather else 1), dtype=np.float32)
        acc = np.zeros((max_acc, n_slots, LANES))
        pend = np.zeros((max_acc, 2, LANES))
        flag = np.zeros(max_acc, dtype=np.bool_)
        touched = np.zeros(max_acc, dtype=np.int64)
        accd = np.zeros((max_dense, n_slots, LANES))
        pendd = np.zeros((max_dense, 2, LANES))
        # the many-stream loop's accumulators, C-contiguous at each model's own width (a slice of one wide
        # array would be a strided view, whose inner loops over the streams the compiler does not vectorise)
        accw = np.zeros((n_slots, LANES, 1))
        pendw = np.zeros((2, LANES, 1))
        wide_acc = [np.zeros((n_slots, LANES, max(n_dense[m], 1))) for m in range(n_models)]
        wide_pend = [np.zeros((2, LANES, max(n_dense[m], 1))) for m in range(n_models)]
        terms = np.zeros(N_TERMS)
        values = np.empty(N_METRIC_SLOTS)
        for block in range(th, n_blocks, n_threads):
            b0 = block * LANES
            n_lanes = min(LANES, n_batch - b0)
            counts[:] = 0.0
            for lane in range(n_lanes):
                row = counts[lane]
                if from_counts:
                    for i in range(n):
                        row[i] = draws[b0 + lane, i]
                else:  # drawn row indices (the cast types the branch for float counts too, never taken then)
                    for i in range(n):
                        row[np.int64(draws[b0 + lane, i])] += 1.0
            for m in range(n_models):
                if identity[m]:
                    walked = counts.T
                else:
                    order_m = order[m]
                    for lane in range(LANES):
                        src = counts[lane]
                        dst = cs[lane]
                        for j in range(n):
                            dst[j] = src[order_m[j]]
                    walked = cs.T
                na = n_acc[m]
                nd = n_dense[m]
                s0, s1 = st_off[m], st_off[m + 1]
                a0, a1 = a_off[m], a_off[m + 1]
                _walk(
                    walked,
                    y[m],
                    tv[m],
                    seg_starts[seg_off[m] : seg_off[m + 1]],
                    seg_tie[seg_off[m] : seg_off[m + 1]],
                    splits[m],
                    weights[w_off[m] : w_off[m + 1]],
                    w_cols[m],
                    codes[c_off[m] : c_off[m + 1]],
                    c_cols[m],
                    st_weight[s0:s1],
                    st_code[s0:s1],
                    st_acc[s0:s1],
                    st_univ[s0:s1],
                    st_derived[s0:s1],
                    acc_univ[a0:a1],
                    acc_is_univ[a0:a1],
                    part_from[p_off[m] : p_off[m + 1]],
                    part_to[p_off[m] : p_off[m + 1]],
                    part_slot0[p_off[m] : p_off[m + 1]],
                    acc[:na],
                    pend[:na],
                    flag[:na],
                    touched[:na],
                    dense_weights[dw_off[m] : dw_off[m + 1]],
                    nd,
                    accd[:nd],
                    pendd[:nd],
                    wide_acc[m] if nd > DENSE_LANE_MAX else accw,
                    wide_pend[m] if nd > DENSE_LANE_MAX else pendw,
                )
                _finalize(
                    acc[:na],
                    accd[:nd],
                    n_lanes,
                    out_acc[o_off[m] : o_off[m + 1]],
                    out_side[o_off[m] : o_off[m + 1]],
                    acc_univ[a0:a1],
                    n_thr,
                    term_slots,
                    slots,
                    odds,
                    out,
                    b0,
                    o_off[m],
                    terms,
                    values,
                )


def run_kernel(
    layout: WalkLayout,
    draws: np.ndarray,
    *,
    from_counts: bool,
    slots: np.ndarray,
    odds: float,
    n_threads: int,
    out: np.ndarray,
) -> None:
    """Every metric of every output of ``layout`` on each resample of a batch.

    Parameters
    ----------
    layout : WalkLayout
    draws : ndarray of shape (B, n), int
        Drawn row indices of each resample, or (``from_counts``) each row's or unit's count (a
        permutation's 0/1 membership, a unit's multiplicity for the point estimates; float64 counts times
        weights re-estimated on the resample, :func:`.bootstrap.bootstrap_layout`'s ``reweight``).
    from_counts : bool
    slots : ndarray of shape (n_metrics,), int64
        :func:`.sums.metric_slots` of the requested metrics.
    odds : float
        Net-benefit odds ``t / (1 - t)``.
    n_threads : int
        numba threads (the caller sets numba's thread count, :class:`.resampling.numba_threads`).
    out : ndarray of shape (B, n_outputs, n_thresholds, n_metrics), float64
        Receives the metrics (NaN where undefined).
    """
    L = layout
    _kernel(
        np.ascontiguousarray(draws),
        bool(from_counts),
        L.order,
        L.identity,
        L.y,
        L.term_values,
        L.term_slots,
        L.seg_starts,
        L.seg_tie,
        L.seg_off,
        L.splits,
        L.weights,
        L.w_off,
        L.w_cols,
        L.codes,
        L.c_off,
        L.c_cols,
        L.st_weight,
        L.st_code,
        L.st_acc,
        L.st_univ,
        L.st_derived,
        L.st_off,
        L.n_acc,
        L.acc_univ,
        L.acc_is_univ,
        L.a_off,
        L.part_from,
        L.part_to,
        L.part_slot0,
        L.p_off,
        L.dense_weights,
        L.dw_off,
        L.n_dense,
        L.out_acc,
        L.out_side,
        L.o_off,
        np.ascontiguousarray(slots, dtype=np.int64),
        float(odds),
        int(max(1, min(n_threads, (draws.shape[0] + LANES - 1) // LANES))),
        out,
    )


# ----------------------------------------------------------------------------------------------
# Subsets of a one-stream layout (module docstring, "Subsets")
# ----------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class SubsetLayout:
    """The tables with which :func:`run_subset_kernel` walks subsets of a one-stream layout's rows.

    Attributes
    ----------
    position : ndarray of shape (n,), int64
        Each row's place in score order.
    table : ndarray of shape (n, 7 + n_terms), float64
        Per place in score order, the values one row of a subset reads, side by side (one or two cache lines
        per row): its tie group (rows of equal score share one, numbered in increasing order), its weighted
        label ``w y`` and ``w (1 - y)``, the universe's weighted positives and negatives (each row counted
        ``count`` times) below its group and in its group, and its weighted per-row terms ``w t``.
    cuts : ndarray of shape (n_thresholds,), int64
        The first place whose score reaches each threshold.
    universe : ndarray of shape (n_slots,), float64
        The universe's sums in the walk's accumulator slots (``X1``, ``X2`` zero).
    """

    position: np.ndarray
    table: np.ndarray
    cuts: np.ndarray
    universe: np.ndarray


#: Columns of :attr:`SubsetLayout.table`: group, w y, w (1 - y), universe positives and negatives below the
#: group, in the group, then the terms.
_S_GROUP, _S_P, _S_Q, _S_BELOW_P, _S_BELOW_N, _S_IN_P, _S_IN_N, _S_TERMS = range(8)


def subset_layout(layout: WalkLayout, count: np.ndarray) -> SubsetLayout:
    """The tables of :func:`run_subset_kernel` for a layout of one model with one stream (no codes).

    Parameters
    ----------
    layout : WalkLayout
        One model, one stream without codes or universe (a permutation test's universe).
    count : ndarray of shape (n,), int
        How often each row (original order) counts in the universe (the units' multiplicities).

    Returns
    -------
    SubsetLayout

    Raises
    ------
    ValueError
        If the layout has several models or streams, or ``count`` does not have one value per row.
    """
    if layout.n_models != 1 or int(layout.n_dense[0]) != 1 or int(layout.n_acc[0]) != 0:
        raise ValueError("subset_layout needs a layout of one model with one stream without codes or universe")
    n = layout.n
    count = np.asarray(count, dtype=np.float64)
    if count.shape != (n,):
        raise ValueError(f"count must have one value per row, shape ({n},); got {count.shape}")
    order = layout.order[0]
    position = np.empty(n, dtype=np.int64)
    position[order] = np.arange(n, dtype=np.int64)
    starts = layout.seg_starts[layout.seg_off[0] : layout.seg_off[1]]
    tie = layout.seg_tie[layout.seg_off[0] : layout.seg_off[1]][:-1]  # one flag per segment
    opens = np.ones(n, dtype=bool)  # a place opens a tie group unless it follows the first place of a tie segment
    for start, stop in zip(starts[:-1][tie], starts[1:][tie], strict=True):
        opens[start + 1 : stop] = False
    group = np.cumsum(opens) - 1
    w = layout.dense_weights[layout.dw_off[0] : layout.dw_off[1]]
    y = layout.y[0]
    tv = layout.term_values[0]
    weight = w * count[order]  # the universe's
    positives = weight * y
    negatives = weight - positives
    within = np.stack([np.bincount(group, positives), np.bincount(group, negatives)], axis=1)
    below = np.cumsum(within, axis=0) - within
    cuts = starts[layout.splits[0]].astype(np.int64)
    n_thr = layout.n_thresholds
    universe = np.zeros(_FIXED + 2 * n_thr + tv.shape[0])
    universe[_CP] = positives.sum()
    universe[_CN] = negatives.sum()
    universe[_AUC] = float(np.sum(within[:, 0] * (below[:, 1] + 0.5 * within[:, 1])))
    for h in range(n_thr):
        universe[_FIXED + 2 * h] = positives[: cuts[h]].sum()
        universe[_FIXED + 2 * h + 1] = negatives[: cuts[h]].sum()
    universe[_FIXED + 2 * n_thr :] = tv @ weight
    table = np.empty((n, _S_TERMS + tv.shape[0]))
    table[:, _S_GROUP] = group
    table[:, _S_P] = w * y
    table[:, _S_Q] = w - w * y
    table[:, _S_BELOW_P : _S_BELOW_N + 1] = below[group]
    table[:, _S_IN_P : _S_IN_N + 1] = within[group]
    table[:, _S_TERMS:] = (tv * w).T
    return SubsetLayout(position=position, table=table, cuts=cuts, universe=universe)


@numba.njit(cache=True, inline="always")
def _sort_places(places, scratch, counts):
    """Sort ``places`` (distinct non-negative ints) in place: a bucket sort over their range, each bucket by
    insertion (``O(m)`` for spread values; ``scratch`` and ``counts`` of at least ``m`` and ``m + 1``)."""
    m = places.shape[0]
    if m < 2:
        return
    lo = places[0]
    hi = places[0]
    for i in range(m):
        lo = min(lo, places[i])
        hi = max(hi, places[i])
    span = hi - lo + 1
    for i in range(m + 1):
        counts[i] = 0
    for i in range(m):
        counts[(places[i] - lo) * m // span + 1] += 1
    for i in range(m):
        counts[i + 1] += counts[i]
    for i in range(m):
        k = (places[i] - lo) * m // span
        scratch[counts[k]] = places[i]
        counts[k] += 1
    for i in range(1, m):  # insertion: the buckets are in order already
        v = scratch[i]
        j = i - 1
        while j >= 0 and scratch[j] > v:
            scratch[j + 1] = scratch[j]
            j -= 1
        scratch[j + 1] = v
    for i in range(m):
        places[i] = scratch[i]


@numba.njit(cache=True)
def _subset_kernel(rows, position, table, cuts, universe, term_slots, slots, odds, out):
    """Sums of the rows ``rows[b]`` (each counted once) for every ``b``, then the metrics of them (output 0)
    and of the rest of the universe (output 1) by :func:`_finalize` (module docstring, "Subsets")."""
    n_batch, m = rows.shape
    n_thr = cuts.shape[0]
    n_terms = table.shape[1] - _S_TERMS
    n_slots = universe.shape[0]
    t0 = _FIXED + 2 * n_thr
    acc = np.zeros((2, n_slots, n_batch))
    places = np.empty(m, dtype=np.int64)
    scratch = np.empty(m, dtype=np.int64)
    counts = np.empty(m + 1, dtype=np.int64)
    sums = np.zeros(n_slots)
    for b in range(n_batch):
        for i in range(m):
            places[i] = position[rows[b, i]]
        _sort_places(places, scratch, counts)
        sums[:] = 0.0
        cp = 0.0
        cn = 0.0
        auc = 0.0
        x1 = 0.0
        x2 = 0.0
        i = 0
        while i < m:
            j = places[i]
            g = table[j, _S_GROUP]
            below_p = table[j, _S_BELOW_P]
            below_n = table[j, _S_BELOW_N]
            in_p = table[j, _S_IN_P]
            in_n = table[j, _S_IN_N]
            pg = 0.0
            ng = 0.0
            while i < m and table[places[i], _S_GROUP] == g:
                j = places[i]
                p = table[j, _S_P]
                q = table[j, _S_Q]
                pg += p
                ng += q
                for t in range(n_terms):
                    sums[t0 + t] += table[j, _S_TERMS + t]
                for h in range(n_thr):
                    if j < cuts[h]:
                        sums[_FIXED + 2 * h] += p
                        sums[_FIXED + 2 * h + 1] += q
                i += 1
            auc += pg * (cn + 0.5 * ng)
            x1 += pg * (below_n + 0.5 * in_n)
            x2 += ng * (below_p + 0.5 * in_p)
            cp += pg
            cn += ng
        sums[_CP] = cp
        sums[_CN] = cn
        sums[_AUC] = auc
        sums[_X1] = x1
        sums[_X2] = x2
        for slot in range(n_slots):
            acc[0, slot, b] = sums[slot]
            acc[1, slot, b] = universe[slot]
    out_acc = np.zeros(2, dtype=np.int64)
    out_side = np.array([0, 1], dtype=np.int64)
    a_univ = np.array([1, -1], dtype=np.int64)
    accd = np.zeros((1, n_slots, 1))
    terms = np.zeros(N_TERMS)
    values = np.empty(N_METRIC_SLOTS)
    _finalize(acc, accd, n_batch, out_acc, out_side, a_univ, n_thr, term_slots, slots, odds, out, 0, 0, terms, values)


def run_subset_kernel(
    layout: WalkLayout, subset: SubsetLayout, rows: np.ndarray, *, slots: np.ndarray, odds: float, out: np.ndarray
) -> None:
    """Every metric of subsets of a one-stream layout's rows and of their complements in its universe.

    Parameters
    ----------
    layout : WalkLayout
        One model, one stream without codes (:func:`subset_layout`).
    subset : SubsetLayout
        Its tables (:func:`subset_layout`, with the universe's counts).
    rows : ndarray of shape (B, m), int
        Rows (original order) of each subset, distinct within a subset, each counted once.
    slots : ndarray of shape (n_metrics,), int64
        :func:`.sums.metric_slots` of the requested metrics.
    odds : float
        Net-benefit odds ``t / (1 - t)``.
    out : ndarray of shape (B, 2, n_thresholds, n_metrics), float64
        Receives the metrics of each subset (``out[:, 0]``) and of the rest of the universe (``out[:, 1]``),
        NaN where undefined: what :func:`run_kernel` gives an accumulator of that universe and its complement.

    Examples
    --------
    >>> import numpy as np
    >>> from disaggregated_eval.engine.sums import metric_slots
    >>> model = ModelStreams(scores=np.array([0.1, 0.4, 0.6, 0.9]), weights=np.ones((4, 1)),
    ...                      codes=np.zeros((4, 0), np.int32), streams=(Stream(weight=0),))
    >>> layout = build_layout(np.array([0.0, 1.0, 1.0, 0.0]), [model], thresholds=(0.5,), terms=())
    >>> out = np.empty((1, 2, 1, 1))
    >>> run_subset_kernel(layout, subset_layout(layout, np.ones(4)), np.array([[0, 1]]),
    ...                   slots=metric_slots(["auc"]), odds=1.0, out=out)
    >>> out[0, :, 0, 0].tolist()  # the AUC of rows 0, 1 and of the rest, rows 2, 3
    [1.0, 0.0]
    """
    _subset_kernel(
        np.ascontiguousarray(rows, dtype=np.int64),
        subset.position,
        subset.table,
        subset.cuts,
        subset.universe,
        layout.term_slots,
        np.ascontiguousarray(slots, dtype=np.int64),
        float(odds),
        out,
    )
