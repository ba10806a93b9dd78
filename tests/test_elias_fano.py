"""Elias-Fano coding of stored spot lists: exact round trips, the size it promises, damage
read as damage."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from scrapy_neardup.index import codecs, elias_fano
from scrapy_neardup.index.spot_search import blob_jaccard
from scrapy_neardup.signatures.similarity import multiset_jaccard
from scrapy_neardup.signatures.spotsigs import SpotSet

values_lists = st.lists(st.integers(0, 2**32 - 1), min_size=1, max_size=600).map(sorted)


@settings(max_examples=300, deadline=None)
@given(values_lists)
def test_sorted_lists_come_back_exactly_in_the_bytes_promised(values):
    array = np.array(values, dtype=np.uint32)
    data = elias_fano.encode(array)
    assert len(data) == elias_fano.size(array)
    assert elias_fano.sound(data)
    assert elias_fano.decode(data).tolist() == values


@settings(max_examples=200, deadline=None)
@given(values_lists, st.data())
def test_a_damaged_list_is_refused_or_read_as_as_many_32_bit_values(values, data):
    encoded = bytearray(elias_fano.encode(np.array(values, dtype=np.uint32)))
    if data.draw(st.booleans()):
        del encoded[data.draw(st.integers(0, len(encoded) - 1)) :]
    else:
        encoded[data.draw(st.integers(0, len(encoded) - 1))] ^= 1 << data.draw(st.integers(0, 7))
    damaged = bytes(encoded)
    if not elias_fano.sound(damaged):
        with pytest.raises(ValueError):
            elias_fano.decode(damaged)
        return
    back = elias_fano.decode(damaged)  # its low bits may be any: as a damaged list of form 3
    assert len(back) == int.from_bytes(damaged[:4], "little") and int(back.max()) < 2**32


def test_a_page_of_some_ninety_spots_takes_3_5_bytes_a_spot_or_less():
    """The usual page: about 2 + log2(2**32 / 90) = 27.5 bits a spot, against 32."""
    hashes = np.unique(np.random.default_rng(3).integers(0, 2**32, 90, dtype=np.uint64))
    blob = codecs.spots_blob(SpotSet(hashes, np.ones(len(hashes), dtype=np.uint32)))
    assert blob[0] == 4 and len(blob) <= 3.5 * len(hashes)  # header included


@pytest.mark.parametrize(
    "blob",
    [b"\x04", b"\x04\x00\x00\x00\x00\x19\xff", b"\x04" + (5).to_bytes(4, "little") + b"\x40" + b"\xff" * 30,
     b"\x04" + (2**32 - 1).to_bytes(4, "little") + b"\x19\x01", b"\x04" * 40],
)  # fmt: skip
def test_damaged_stored_lists_are_no_candidate_and_raise_no_other_error(blob):
    assert not codecs.sound_spots_blob(blob)
    with pytest.raises(ValueError):
        codecs.blob_spots(blob)


def test_jaccard_read_straight_from_mixed_forms_matches_the_sets():
    rng = np.random.default_rng(11)
    base = np.unique(rng.integers(0, 2**32, 120, dtype=np.uint64))
    sets = [
        SpotSet(base, np.ones(len(base), dtype=np.uint32)),  # form 4
        SpotSet(base[:3], np.ones(3, dtype=np.uint32)),  # form 3: a few spots
        SpotSet(base[:60], np.r_[np.full(59, 1), 400].astype(np.uint32)),  # counted
    ]
    shared = np.unique(np.r_[base[:50], rng.integers(0, 2**32, 50, dtype=np.uint64)])
    sets.append(SpotSet(shared, np.ones(len(shared), dtype=np.uint32)))
    blobs = [codecs.spots_blob(s) for s in sets]
    assert sorted({b[0] for b in blobs}) == [2, 3, 4]
    for probe in sets:
        assert blob_jaccard(probe, blobs) == pytest.approx([multiset_jaccard(probe, s) for s in sets])
