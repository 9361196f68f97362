"""The Outcome enum keeps the words of --json, JUnit and the tables: a result written and read
back is the same, an outcome formats as its word, and a word that is none is refused."""

from __future__ import annotations

import json

import pytest

from porter.harness.verdicts import XPASS, DtypeResult, OpResult, Outcome


def test_the_words_are_those_porter_always_wrote():
    assert [o.value for o in Outcome] == ["pass", "fail", "xfail", "xpass", "skip"]
    assert Outcome.XPASS is XPASS and XPASS == "xpass" and f"{XPASS}" == "xpass"


def test_a_result_round_trips_through_json_as_words():
    result = OpResult("neg", "neg", "", "neg", "emulate",
                      [DtypeResult("float16", Outcome.XPASS, upstream=Outcome.FAIL)])
    text = json.dumps(result.to_json())
    assert '"outcome": "xpass"' in text and '"upstream": "fail"' in text
    back = OpResult.from_json(json.loads(text))
    assert back == result and back.dtypes[0].outcome is Outcome.XPASS


def test_a_word_that_is_no_outcome_is_refused():
    with pytest.raises(ValueError, match="'xpassed' is not a valid Outcome"):
        DtypeResult("float16", "xpassed")
