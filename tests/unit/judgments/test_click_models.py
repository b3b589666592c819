"""Click models (COEC, PBM) and rating formatting, against hand-worked numbers and simulations."""

from __future__ import annotations

import math
import random
from decimal import ROUND_HALF_UP, Decimal, localcontext
from fractions import Fraction

import numpy as np
import pytest

from workbench.judgments.click_models import coec, format_rating, pbm, rank_ctr

# --------------------------------------------------------------------------------------------
# COEC (docs/algorithms.md, "COEC")

# maxRank = 3. Rank aggregates as the `positions` terms aggregation would return them:
#   rank 0: 2 clicks / 10 impressions -> ctr 0.2
#   rank 1: 1 click  /  4 impressions -> ctr 0.25
#   rank 2: 1 click  /  0 impressions -> ctr 0   (no impressions at this rank)
#   rank 3: 5 clicks /  7 impressions -> ignored (ordinal == maxRank passes the filter, no slot)
CLICKS_BY_RANK = {0: 2, 1: 1, 2: 1, 3: 5}
IMPRESSIONS_BY_RANK = {0: 10, 1: 4, 3: 7}
MAX_RANK = 3

# Per (query, doc): clicks, impressions, best rank (-1 = never clicked or shown), and the rating
# worked by hand as clicks / (ctr[rank] * impressions).
COEC_PAIRS = [
    # name                     clicks impr rank  expected      rating
    ("top clicked", 3, 5, 0, 3.0),  # 0.2 * 5 = 1.0        3 / 1.0  = 3.0
    ("rank 1", 1, 3, 1, 4 / 3),  # 0.25 * 3 = 0.75      1 / 0.75 = 1.333...
    ("shown, never clicked", 0, 4, 1, 0.0),  # 0.25 * 4 = 1.0       0 / 1.0  = 0
    ("other actions only", 0, 0, -1, 0.0),  # rank +inf -> ctr 0   expected 0 -> 0
    ("best rank == maxRank", 2, 2, 3, 0.0),  # ctr[3] does not exist -> expected 0 -> 0
    ("rank without ctr", 1, 6, 2, 0.0),  # ctr[2] = 0 -> expected 0 -> 0
    ("clicked, no impression", 2, 0, 0, 0.0),  # 0.2 * 0 = 0 -> 0
    ("half expected", 1, 2, 0, 2.5),  # 0.2 * 2 = 0.4        1 / 0.4  = 2.5
]


def test_rank_ctr_divides_clicks_by_impressions_per_rank() -> None:
    ctr = rank_ctr(CLICKS_BY_RANK, IMPRESSIONS_BY_RANK, MAX_RANK)
    assert ctr.shape == (3,)
    np.testing.assert_allclose(ctr, [0.2, 0.25, 0.0], rtol=0, atol=1e-15)


def test_rank_ctr_ignores_ranks_outside_the_array_and_ranks_without_clicks() -> None:
    ctr = rank_ctr({-1: 3, 5: 1}, {-1: 4, 0: 8, 5: 2}, 2)
    np.testing.assert_array_equal(ctr, [0.0, 0.0])  # rank 0 shown but never clicked
    assert rank_ctr({0: 1}, {0: 1}, 0).shape == (0,)
    with pytest.raises(ValueError):
        rank_ctr({}, {}, -1)


def test_coec_rates_clicks_over_expected_clicks() -> None:
    ctr = rank_ctr(CLICKS_BY_RANK, IMPRESSIONS_BY_RANK, MAX_RANK)
    _, clicks, impressions, best_rank, expected = zip(*COEC_PAIRS, strict=True)
    ratings = coec(ctr, np.array(clicks), np.array(impressions), np.array(best_rank))
    np.testing.assert_allclose(ratings, expected, rtol=1e-15, atol=0)
    assert [format_rating(r) for r in ratings] == [
        "3.000", "1.333", "0.000", "0.000", "0.000", "0.000", "0.000", "2.500"]


def test_coec_treats_any_rank_outside_the_ctr_array_as_ctr_zero() -> None:
    ctr = np.array([0.5, 0.25])
    ratings = coec(ctr, np.array([1, 1, 1, 1]), np.array([2, 2, 2, 2]), np.array([-5, -1, 2, 99]))
    np.testing.assert_array_equal(ratings, [0.0, 0.0, 0.0, 0.0])
    # the same counts at valid ranks do rate: 1 / (0.5 * 2) = 1 and 1 / (0.25 * 2) = 2
    np.testing.assert_array_equal(
        coec(ctr, np.array([1, 1]), np.array([2, 2]), np.array([0, 1])), [1.0, 2.0])


def test_coec_accepts_empty_input_and_refuses_misaligned_arrays() -> None:
    assert coec(np.array([0.1]), np.array([]), np.array([]), np.array([])).shape == (0,)
    with pytest.raises(ValueError):
        coec(np.array([0.1]), np.array([1, 2]), np.array([1]), np.array([0]))
    with pytest.raises(ValueError):
        coec(np.array([0.1]), np.array([1]), np.array([1]), np.array([0.0]))


# --------------------------------------------------------------------------------------------
# format_rating (docs/algorithms.md, "Rating format")


@pytest.mark.parametrize("value, text", [
    (1.0005, "1.001"),  # Python's f"{1.0005:.3f}" gives "1.000" (binary value is just below)
    (12345.6785, "12345.679"),  # f-format: "12345.678"
    (8.0125, "8.013"),  # f-format: "8.012"
    (0.1235, "0.124"),  # f-format: "0.123"
    (2.0 / 3, "0.667"),
    (4.0 / 3, "1.333"),
    (1.3333333, "1.333"),
    (0, "0.000"),
    (0.0, "0.000"),
    (0.0004999, "0.000"),
    (0.0005, "0.001"),
    (2.5, "2.500"),
    (3, "3.000"),
    (1e-10, "0.000"),
    (1e20, "100000000000000000000.000"),  # shortest digits padded with zeros, as Java does
    (np.float64(1.0005), "1.001"),  # numpy 2 repr is "np.float64(1.0005)"
])
def test_format_rating_rounds_half_up_on_the_shortest_decimal(value: float, text: str) -> None:
    assert format_rating(value) == text


@pytest.mark.parametrize("value", [math.nan, math.inf, -math.inf, np.float64("nan")])
def test_format_rating_refuses_non_finite_values(value: float) -> None:
    with pytest.raises(ValueError):
        format_rating(value)


# --------------------------------------------------------------------------------------------
# PBM

# Tiny example: 2 pairs x 2 ranks, (pair, rank, clicks, impressions)
TINY = np.array([
    (0, 0, 3, 4),
    (0, 1, 1, 4),
    (1, 0, 2, 4),
    (1, 1, 0, 2),
])


def _fit_tiny(iterations: int) -> tuple[np.ndarray, np.ndarray]:
    return pbm(TINY[:, 0], TINY[:, 1], TINY[:, 2], TINY[:, 3], 2, 2,
               max_iterations=iterations, tolerance=0.0)


def test_pbm_one_em_iteration_by_hand() -> None:
    # Start alpha = gamma = 0.5. For every cell P(A=1|C=0) = P(E=1|C=0)
    #   = 0.5 * 0.5 / (1 - 0.25) = 1/3.
    # alpha[0] = (clicks 3+1 + non-clicks (1+3) * 1/3) / impressions 8 = (4 + 4/3) / 8 = 2/3
    # alpha[1] = (2+0 + (2+2) * 1/3) / 6 = (2 + 4/3) / 6 = 5/9
    # gamma[0] = (3+2 + (1+2) * 1/3) / 8 = 6/8 = 3/4
    # gamma[1] = (1+0 + (3+2) * 1/3) / 6 = (8/3) / 6 = 4/9
    alpha, gamma = _fit_tiny(1)
    np.testing.assert_allclose(alpha, [2 / 3, 5 / 9], rtol=1e-12)
    np.testing.assert_allclose(gamma, [3 / 4, 4 / 9], rtol=1e-12)


def test_pbm_second_em_iteration_by_hand() -> None:
    # From alpha = (2/3, 5/9), gamma = (3/4, 4/9) the two posteriors differ, which checks that
    # alpha gets P(A=1|C=0) = a(1-g)/(1-ag) and gamma gets P(E=1|C=0) = g(1-a)/(1-ag):
    #   cell   a    g    1-ag    P(A|C=0)                  P(E|C=0)                non-clicks
    #   0,0   2/3  3/4   1/2     (2/3)(1/4)/(1/2) = 1/3    (3/4)(1/3)/(1/2) = 1/2      1
    #   0,1   2/3  4/9   19/27   (2/3)(5/9)/(19/27)=10/19  (4/9)(1/3)/(19/27)=4/19     3
    #   1,0   5/9  3/4   7/12    (5/9)(1/4)/(7/12) = 5/21  (3/4)(4/9)/(7/12) = 4/7     2
    #   1,1   5/9  4/9   61/81   (25/81)/(61/81) = 25/61   (16/81)/(61/81) = 16/61     2
    # alpha[0] = (4 + 1*1/3 + 3*10/19) / 8    = 337/456
    # alpha[1] = (2 + 2*5/21 + 2*25/61) / 6   = 2111/3843
    # gamma[0] = (5 + 1*1/2 + 2*4/7) / 8      = 93/112
    # gamma[1] = (1 + 3*4/19 + 2*16/61) / 6   = 833/2318
    alpha, gamma = _fit_tiny(2)
    np.testing.assert_allclose(alpha, [337 / 456, 2111 / 3843], rtol=1e-12)
    np.testing.assert_allclose(gamma, [93 / 112, 833 / 2318], rtol=1e-12)


def _reference_em(rows: np.ndarray, n_pairs: int, n_ranks: int, iterations: int):
    """The PBM update written cell by cell in exact fractions, to check the vectorised one."""
    alpha = [Fraction(1, 2)] * n_pairs
    gamma = [Fraction(1, 2)] * n_ranks
    for _ in range(iterations):
        a_num, a_den = [Fraction(0)] * n_pairs, [0] * n_pairs
        g_num, g_den = [Fraction(0)] * n_ranks, [0] * n_ranks
        for p, r, k, n in rows.tolist():
            a, g = alpha[p], gamma[r]
            a_num[p] += k + (n - k) * a * (1 - g) / (1 - a * g)
            g_num[r] += k + (n - k) * g * (1 - a) / (1 - a * g)
            a_den[p] += n
            g_den[r] += n
        alpha = [num / den for num, den in zip(a_num, a_den, strict=True)]
        gamma = [num / den for num, den in zip(g_num, g_den, strict=True)]
    return [float(x) for x in alpha], [float(x) for x in gamma]


def test_pbm_matches_a_cell_by_cell_reference_with_repeated_cells() -> None:
    rng = np.random.default_rng(11)
    n_pairs, n_ranks, n_rows = 6, 4, 30  # 30 rows over 24 cells: some (pair, rank) repeat
    impressions = rng.integers(1, 20, n_rows)
    rows = np.column_stack([
        rng.integers(0, n_pairs, n_rows),
        rng.integers(0, n_ranks, n_rows),
        rng.integers(0, impressions + 1),
        impressions,
    ])
    rows[:n_pairs, 0] = np.arange(n_pairs)  # every pair and rank gets impressions
    rows[:n_ranks, 1] = np.arange(n_ranks)
    alpha, gamma = pbm(rows[:, 0], rows[:, 1], rows[:, 2], rows[:, 3], n_pairs, n_ranks,
                       max_iterations=5, tolerance=0.0)
    ref_alpha, ref_gamma = _reference_em(rows, n_pairs, n_ranks, 5)
    np.testing.assert_allclose(alpha, ref_alpha, rtol=1e-10)
    np.testing.assert_allclose(gamma, ref_gamma, rtol=1e-10)


def _simulate(rng: np.random.Generator, alpha: np.ndarray, gamma: np.ndarray,
              ranks_per_pair: int, impressions: int):
    """Each pair shown `impressions` times at each of `ranks_per_pair` distinct random ranks."""
    n_pairs, n_ranks = alpha.size, gamma.size
    ranks = np.argsort(rng.random((n_pairs, n_ranks)), axis=1)[:, :ranks_per_pair].ravel()
    pairs = np.repeat(np.arange(n_pairs), ranks_per_pair)
    shown = np.full(pairs.size, impressions)
    clicks = rng.binomial(shown, alpha[pairs] * gamma[ranks])
    return pairs, ranks, clicks, shown


def test_pbm_recovers_click_probabilities_from_simulated_clicks() -> None:
    rng = np.random.default_rng(20240601)
    true_alpha = rng.uniform(0.1, 0.9, 50)
    true_gamma = np.array([1.0, 0.8, 0.65, 0.5, 0.4, 0.3, 0.25, 0.2, 0.15, 0.1])
    pairs, ranks, clicks, shown = _simulate(rng, true_alpha, true_gamma, 4, 100_000)
    alpha, gamma = pbm(pairs, ranks, clicks, shown, 50, 10, max_iterations=2000, tolerance=1e-10)

    # One cell's empirical CTR has standard error sqrt(p(1-p)/n) <= sqrt(0.25/1e5) = 0.0016, and
    # the fit pools each product over the 4 cells of its pair and the ~20 of its rank, so its
    # error is smaller still; 0.005 is 3 single-cell standard errors. A position-blind fit is
    # off by up to ~0.4 here, so this fails for a wrong model.
    np.testing.assert_allclose(alpha[pairs] * gamma[ranks], true_alpha[pairs] * true_gamma[ranks],
                               rtol=0, atol=0.005)
    # Only ratios are identified (alpha*c, gamma/c fit equally well): compare scale-free.
    np.testing.assert_allclose(gamma / gamma[0], true_gamma / true_gamma[0], rtol=0.03)
    np.testing.assert_allclose(alpha / alpha[0], true_alpha / true_alpha[0], rtol=0.05)
    # The rating (alpha) ranks the pairs as their true attractiveness does.
    assert np.corrcoef(np.argsort(np.argsort(alpha)), np.argsort(np.argsort(true_alpha)))[0, 1] \
        > 0.99


def test_pbm_rating_corrects_for_position_where_raw_ctr_does_not() -> None:
    # Pair 0 is always shown at rank 0, pair 1 always at rank 5, pair 2 at both (links the ranks).
    # Pair 1 is more attractive but its raw CTR is lower because rank 5 is rarely examined.
    true_alpha = np.array([0.3, 0.6, 0.5])
    true_gamma = np.array([1.0, 0.0, 0.0, 0.0, 0.0, 0.2])
    pairs = np.array([0, 1, 2, 2])
    ranks = np.array([0, 5, 0, 5])
    shown = np.full(4, 200_000)
    clicks = np.random.default_rng(3).binomial(shown, true_alpha[pairs] * true_gamma[ranks])
    assert clicks[0] / shown[0] > clicks[1] / shown[1]  # raw CTR: pair 0 looks better
    alpha, gamma = pbm(pairs, ranks, clicks, shown, 3, 6, max_iterations=2000, tolerance=1e-12)
    assert alpha[1] > alpha[2] > alpha[0]  # PBM: true order 0.6 > 0.5 > 0.3
    np.testing.assert_array_equal(gamma[1:5], 0.0)  # ranks never shown stay 0


def test_pbm_keeps_zero_for_unseen_pairs_and_ignores_empty_cells() -> None:
    pairs = np.array([0, 0, 2, 2])
    ranks = np.array([0, 1, 0, 1])
    clicks = np.array([5, 2, 0, 0])
    shown = np.array([10, 10, 0, 0])  # pair 2 only has empty cells; pair 1 has no rows
    alpha, gamma = pbm(pairs, ranks, clicks, shown, 3, 3)
    assert alpha[1] == 0.0 and alpha[2] == 0.0 and gamma[2] == 0.0
    assert alpha[0] > 0 and gamma[0] > gamma[1] > 0
    # the empty cells change nothing
    alpha_without, gamma_without = pbm(pairs[:2], ranks[:2], clicks[:2], shown[:2], 3, 3)
    np.testing.assert_array_equal(alpha, alpha_without)
    np.testing.assert_array_equal(gamma, gamma_without)


def test_pbm_counts_clicks_beyond_impressions_as_impressions() -> None:
    # A cell with 7 clicks and 5 impressions is a cell with 7 clicks out of 7.
    alpha, gamma = pbm(np.array([0, 0]), np.array([0, 1]), np.array([7, 1]), np.array([5, 4]),
                       1, 2, max_iterations=3, tolerance=0.0)
    alpha_7, gamma_7 = pbm(np.array([0, 0]), np.array([0, 1]), np.array([7, 1]),
                           np.array([7, 4]), 1, 2, max_iterations=3, tolerance=0.0)
    np.testing.assert_array_equal(alpha, alpha_7)
    np.testing.assert_array_equal(gamma, gamma_7)
    assert np.all((alpha >= 0) & (alpha <= 1)) and np.all((gamma >= 0) & (gamma <= 1))


def test_pbm_all_clicked_pair_stays_finite() -> None:
    # alpha -> 1 and gamma -> 1 together make 1 - alpha*gamma = 0; no NaN may come out.
    alpha, gamma = pbm(np.array([0]), np.array([0]), np.array([9]), np.array([9]), 1, 1)
    assert np.all(np.isfinite(alpha)) and np.all(np.isfinite(gamma))
    assert alpha[0] * gamma[0] == pytest.approx(1.0)


def test_pbm_stops_early_once_converged() -> None:
    # With a tolerance of 1e-3 it stops before max_iterations: the result then differs from a
    # fit run for exactly as many iterations with tolerance 0 only if it stopped early.
    args = (TINY[:, 0], TINY[:, 1], TINY[:, 2], TINY[:, 3], 2, 2)
    early = pbm(*args, max_iterations=10_000, tolerance=1e-3)
    full = pbm(*args, max_iterations=10_000, tolerance=0.0)
    assert not np.array_equal(early[0], full[0])
    np.testing.assert_allclose(early[0] * early[1][0], full[0] * full[1][0], atol=0.05)


def test_pbm_fits_thousands_of_pairs_in_any_row_order() -> None:
    # 20,000 pairs x 5 ranks = 100,000 rows: only practical when nothing loops over pairs.
    rng = np.random.default_rng(5)
    true_alpha = rng.uniform(0.05, 0.95, 20_000)
    true_gamma = np.linspace(0.9, 0.2, 10)
    pairs, ranks, clicks, shown = _simulate(rng, true_alpha, true_gamma, 5, 2_000)
    alpha, gamma = pbm(pairs, ranks, clicks, shown, 20_000, 10)
    assert alpha.shape == (20_000,) and gamma.shape == (10,)
    fitted = alpha[pairs] * gamma[ranks]
    truth = true_alpha[pairs] * true_gamma[ranks]
    # cell SE <= sqrt(0.25/2000) = 0.011; the pooled fit's mean error is well below it.
    assert np.mean(np.abs(fitted - truth)) < 0.01

    order = rng.permutation(pairs.size)
    alpha_shuffled, gamma_shuffled = pbm(pairs[order], ranks[order], clicks[order], shown[order],
                                         20_000, 10)
    np.testing.assert_allclose(alpha_shuffled, alpha, rtol=1e-9)
    np.testing.assert_allclose(gamma_shuffled, gamma, rtol=1e-9)


@pytest.mark.parametrize("pair, rank, clicks, shown", [
    ([0, 2], [0, 0], [1, 1], [2, 2]),  # pair index out of range (n_pairs = 2)
    ([0, 1], [0, -1], [1, 1], [2, 2]),  # negative rank
    ([0, 1], [0, 0], [1, -1], [2, 2]),  # negative clicks
    ([0, 1], [0], [1, 1], [2, 2]),  # misaligned
    ([0.0, 1.0], [0, 0], [1, 1], [2, 2]),  # float indices
])
def test_pbm_refuses_malformed_rows(pair, rank, clicks, shown) -> None:
    with pytest.raises(ValueError):
        pbm(np.array(pair), np.array(rank), np.array(clicks), np.array(shown), 2, 2)


def test_pbm_with_no_rows_returns_zeros() -> None:
    alpha, gamma = pbm(np.array([], dtype=int), np.array([], dtype=int), np.array([]),
                       np.array([]), 3, 2)
    np.testing.assert_array_equal(alpha, np.zeros(3))
    np.testing.assert_array_equal(gamma, np.zeros(2))


def _decimal_rating(value: float) -> str:
    """The rule itself, through Decimal: HALF_UP to three decimals of the shortest repr."""
    with localcontext() as context:
        context.prec = 400
        return f"{Decimal(repr(value)).quantize(Decimal('0.001'), rounding=ROUND_HALF_UP):f}"


def test_format_rating_on_digits_agrees_with_decimal_rounding() -> None:
    rng = random.Random(22)
    values = [rng.uniform(0, 10) for _ in range(20_000)] + \
        [rng.uniform(-5, 5) for _ in range(5_000)] + \
        [rng.randint(0, 10**6) / 10**4 for _ in range(5_000)] + \
        [-0.0, -0.0005, -0.0004999, 0.9995, 9.9995, 123456789.9995, 1e-05, 1.5e-4, 5e-324,
         1.7976931348623157e308, 1e16, 1.2345e17]
    assert [format_rating(v) for v in values] == [_decimal_rating(v) for v in values]
