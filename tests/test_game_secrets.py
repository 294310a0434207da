"""Secret draws (SPEC §8.7): nothing an agent can replay determines a game instance.

The instance seed is a name. The plan, every training seed and every row list
derive from a 128-bit secret drawn from the operating system when the instance
is first built, kept in the grader's cache and manifest only. These tests need
no training: they check the draw and the cache's record of secrets.
"""

from __future__ import annotations

import hashlib

import numpy as np
import pytest
from game_helpers import GAME, game_variant, secret_for

from pytest_clinaudit.catalog.cache import ReferenceCache
from pytest_clinaudit.catalog.instances import instance_secret
from pytest_clinaudit.reference.game.draw import (
    attempt_seed,
    base_rows,
    check_secret,
    draw_plan,
    member_rows,
    new_secret,
)

N_TRAIN = 40_000


def _rows(
    secret: str, attempt: int = 0, models: int | None = None
) -> tuple[np.ndarray, list[np.ndarray]]:
    """The base's rows and the first ``models`` models' rows (default: all) of ``secret``'s
    attempt, as a build draws them."""
    game = game_variant().game
    base = base_rows(N_TRAIN, game.training.base_rows, attempt_seed(secret, attempt, game.models))
    listed = [
        member_rows(
            N_TRAIN,
            game.training.rows,
            game.training.calibration_rows,
            attempt_seed(secret, attempt, index),
            exclude=base,
        )[0]
        for index in range(game.models if models is None else models)
    ]
    return base, listed


def test_a_new_secret_is_128_bits_from_the_operating_system() -> None:
    drawn = {new_secret() for _ in range(200)}
    assert len(drawn) == 200
    for secret in drawn:
        assert check_secret(secret) == secret
        assert len(secret) == 32
    for bad in ("", "0" * 31, "G" * 32, "AB" * 16, 12, None):
        with pytest.raises(ValueError, match="32 lowercase hexadecimal digits"):
            check_secret(bad)


def test_the_seed_names_an_instance_and_draws_nothing() -> None:
    """Two seeds with one secret are one instance (plan and rows); one seed with two secrets
    are two."""
    game = game_variant().game
    secret = secret_for(3)
    assert draw_plan(game, 3, secret).models == draw_plan(game, 4, secret).models
    other = secret_for(4)
    plans = {draw_plan(game, 3, s).models for s in (secret, other, new_secret(), new_secret())}
    assert len(plans) > 1
    base, models = _rows(secret)
    base_other, models_other = _rows(other)
    assert not np.array_equal(base, base_other)
    assert not any(np.array_equal(a, b) for a, b in zip(models, models_other, strict=True))


def test_the_listed_rows_cannot_be_replayed_from_the_seed() -> None:
    """The replay route of SPEC §8.7: with the package's draw code, an agent tried seeds from
    0 and attempts 0-5 until the listed rows matched. Every way of turning a small number
    into a secret is tried here, and none gives the listed rows of an instance whose secret
    the operating system drew."""
    secret = new_secret()
    listed_base, listed_models = _rows(secret, models=1)
    guesses = []
    for n in range(0, 16):
        guesses += [
            f"{n:032x}",
            hashlib.sha256(str(n).encode()).hexdigest()[:32],
            hashlib.md5(str(n).encode()).hexdigest(),  # noqa: S324 - a guess, not security
            secret_for(n),
        ]
    for guess in guesses:
        for attempt in range(6):
            base, models = _rows(guess, attempt, models=1)
            assert not np.array_equal(base, listed_base), guess
            assert not np.array_equal(models[0], listed_models[0]), guess


def test_the_cache_keeps_one_secret_per_variant_and_seed(tmp_path: object) -> None:
    cache = ReferenceCache(tmp_path)  # type: ignore[arg-type]
    icu, flchain = game_variant(GAME), game_variant("flchain-game")
    first = instance_secret(icu, 1, cache)
    assert instance_secret(icu, 1, cache) == first  # building and grading meet on it
    assert instance_secret(icu, 2, cache) != first
    # Two variants given the same seed draw apart.
    assert instance_secret(flchain, 1, cache) != first
    # Without a cache directory every build is a new instance.
    uncached = ReferenceCache(None)
    assert instance_secret(icu, 1, uncached) != instance_secret(icu, 1, uncached)


def test_an_instance_measured_the_old_way_is_not_served_from_the_cache(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The same settings, secret and data under another version of the measurements are
    another cache entry: references measured the old way (the strong attack on drawn rows)
    are rebuilt, not served under a brief that names other rows."""
    from pytest_clinaudit.catalog import instances
    from pytest_clinaudit.versions import library_versions

    variant = game_variant(GAME)
    secret = secret_for(1)

    def key() -> str:
        payload = instances._payload(variant, 1, secret, variant.context, library_versions([]))
        return instances.cache_key(payload)

    now = key()
    monkeypatch.setattr(instances, "MEASURED", instances.MEASURED - 1)
    assert key() != now


def test_a_damaged_secret_record_is_a_new_instance_not_a_crash(tmp_path: object) -> None:
    cache = ReferenceCache(tmp_path)  # type: ignore[arg-type]
    icu = game_variant(GAME)
    first = instance_secret(icu, 5, cache)
    (record,) = (tmp_path / "game-secrets").glob("*.json")  # type: ignore[operator]
    record.write_text(record.read_text().replace(first, "not-a-secret"))
    again = instance_secret(icu, 5, cache)
    assert check_secret(again) == again
    assert again != first


def test_a_given_secret_names_the_seed_only_where_nothing_was_built_under_it(
    tmp_path: object,
) -> None:
    """A build from a manifest's secret (``--like``) records it for its seed when the cache has
    no instance of that seed yet, so a bare ``--seed`` lookup meets it; an earlier record is
    kept, and the given secret is still the one built."""
    cache = ReferenceCache(tmp_path)  # type: ignore[arg-type]
    icu = game_variant(GAME)
    given = secret_for(8)
    assert instance_secret(icu, 8, cache, given=given) == given
    assert instance_secret(icu, 8, cache) == given
    first = instance_secret(icu, 9, cache)
    assert instance_secret(icu, 9, cache, given=given) == given
    assert instance_secret(icu, 9, cache) == first
