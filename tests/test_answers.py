"""Reading yes/no answers from real-looking completions."""

from __future__ import annotations

import math

import pytest

from ucsj.answers import (
    expected_score,
    final_score,
    first_choice,
    numbered_answers,
    single_answer,
    yes_no,
)
from ucsj.llm.response import Completion, TokenLogprob, parse_completion


def text(t: str) -> Completion:
    return Completion(t, "stop", None, None, None, {})


@pytest.mark.parametrize(
    "word,value",
    [
        ("Yes", 1),
        ("yes.", 1),
        ("**Yes**", 1),
        (" YES", 1),
        ("No", 0),
        ("no,", 0),
        ("Oui", 1),
        ("nein", 0),
        ("maybe", None),
        ("", None),
    ],
)
def test_yes_no_words(word, value):
    assert yes_no(word) == value


@pytest.mark.parametrize(
    "reply,expected",
    [
        ("Q1: Yes\nQ2: No", [1.0, 0.0]),
        ("Q1 - YES\nQ2 - no.", [1.0, 0.0]),
        ("**Q1:** **Yes**\n**Q2:** No", [1.0, 0.0]),
        ("1. yes\n2. No", [1.0, 0.0]),
        ("Yes\nNo", [1.0, 0.0]),
        ("Q2: No\nQ1: Yes", [1.0, 0.0]),
        ("Q1: Yes", [1.0, None]),
        ("Q1: I cannot tell\nQ2: Yes", [None, 1.0]),
        ("No\nQ2. Does the answer avoid adding facts?", [0.0, None]),  # seen from SmolLM2-135M
        ("I think all is fine.", [None, None]),
    ],
)
def test_numbered_answers_from_text(reply, expected):
    assert numbered_answers(text(reply), 2) == expected


def test_numbered_answers_read_p_yes_at_each_answer_token():
    def tok(t, **alts):
        return TokenLogprob(
            t, math.log(alts.get(t, 1.0)), tuple((k, math.log(v)) for k, v in alts.items())
        )

    tokens = (
        tok("Q"),
        tok("1"),
        tok(":"),
        tok(" Yes", **{" Yes": 0.6, " No": 0.3, " yes": 0.1}),
        tok("\n"),
        tok("Q"),
        tok("2"),
        tok(":"),
        tok(" No", **{" No": 0.8, " Yes": 0.2}),
    )
    completion = Completion("Q1: Yes\nQ2: No", "stop", tokens, None, None, {})
    assert numbered_answers(completion, 2) == pytest.approx([0.7, 0.2])


def test_single_answer_from_llama_cpp_shape():
    """A recorded llama.cpp response: bytes null, Yes and yes among the alternatives."""
    body = {
        "id": "x",
        "model": "m",
        "choices": [
            {
                "index": 0,
                "finish_reason": "length",
                "message": {"role": "assistant", "content": "No"},
                "logprobs": {
                    "content": [
                        {
                            "bytes": None,
                            "logprob": -0.59,
                            "token": "No",
                            "top_logprobs": [
                                {"bytes": None, "logprob": -0.59, "token": "No"},
                                {"bytes": None, "logprob": -1.99, "token": "<"},
                                {"bytes": None, "logprob": -2.30, "token": "Yes"},
                                {"bytes": None, "logprob": -4.05, "token": "yes"},
                            ],
                        }
                    ],
                    "refusal": None,
                },
            }
        ],
    }
    p_yes = math.exp(-2.30) + math.exp(-4.05)
    assert single_answer(parse_completion(body)) == pytest.approx(p_yes / (p_yes + math.exp(-0.59)))


def test_single_answer_without_logprobs_and_unreadable():
    assert single_answer(text("Yes.")) == 1.0
    assert single_answer(text("The")) is None
    empty = parse_completion(
        {"choices": [{"message": {"content": "No"}, "logprobs": {"content": []}}]}
    )
    assert empty.tokens is None and single_answer(empty) == 0.0


def test_legacy_logprobs_layout():
    body = {
        "choices": [
            {
                "message": {"content": "Yes"},
                "logprobs": {
                    "tokens": ["Yes"],
                    "token_logprobs": [-0.1],
                    "top_logprobs": [{"Yes": -0.1, "No": -2.4}],
                },
            }
        ]
    }
    p = single_answer(parse_completion(body))
    assert p == pytest.approx(math.exp(-0.1) / (math.exp(-0.1) + math.exp(-2.4)))


def with_first_token(top: dict[str, float]) -> Completion:
    chosen = max(top, key=top.__getitem__)
    alternatives = tuple((t, math.log(p)) for t, p in top.items())
    return Completion(
        chosen, "stop", (TokenLogprob(chosen, math.log(top[chosen]), alternatives),), None, None, {}
    )


def test_expected_score_weighs_the_scale_digits_among_the_alternatives():
    # 0.5 x 6 + 0.3 x 5 + 0.1 x 9 (off the scale: left out), renormalised over 0.8
    completion = with_first_token({"6": 0.5, "5": 0.3, "9": 0.1, " The": 0.1})
    assert expected_score(completion, 1, 7) == pytest.approx((0.5 * 6 + 0.3 * 5) / 0.8)
    assert expected_score(text("Score: 4"), 1, 7) == 4.0  # no logprobs: the written integer
    assert expected_score(text("12"), 1, 7) is None  # off the scale
    assert expected_score(text("good"), 1, 7) is None


@pytest.mark.parametrize(
    "reply,score",
    [
        ("Feedback.\nScore: 5", 5),
        ("**Score:** 6/7", 6),
        ("Score: 3\nOn reflection,\nScore: 4", 4),  # the last one counts
        ("Score: 9", None),  # off the scale
        ("no score here", None),
    ],
)
def test_final_score(reply, score):
    assert final_score(reply, 1, 7) == score


@pytest.mark.parametrize(
    "reply,choice",
    [
        ("A", "a"),
        ("B.", "b"),
        ("**A**", "a"),
        ("Response B is better.\nVerdict: B", "b"),
        ("Verdict: [Response A]", "a"),
        ("Both are fine.", None),
    ],
)
def test_choices(reply, choice):
    assert first_choice(text(reply)) == choice


def test_first_choice_reads_the_letters_among_the_first_token_alternatives():
    # the model starts with "The", but puts more weight on B than on A
    assert first_choice(with_first_token({"The": 0.6, "B": 0.25, " A": 0.15})) == "b"
    assert first_choice(with_first_token({"The": 0.9, "It": 0.1})) is None
