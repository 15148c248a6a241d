"""Reading yes/no answers from completions: P(yes) from logprobs, or 1/0 from the text.

Pure functions: no I/O. DESIGN.md, "Criterion responses".
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

from ucsj.llm.response import Completion, TokenLogprob

# English first; a few other languages' words because small models sometimes answer in the
# sample's language. Compared after stripping punctuation and case-folding.
YES_WORDS = frozenset(
    {
        "yes",
        "y",
        "true",
        "oui",
        "ja",
        "sí",
        "si",
        "sim",
        "да",
        "हाँ",
        "हां",
        "haan",
        "はい",
        "是",
        "是的",
        "نعم",
        "evet",
        "tak",
    }
)
NO_WORDS = frozenset(
    {
        "no",
        "n",
        "false",
        "non",
        "nein",
        "não",
        "nao",
        "нет",
        "नहीं",
        "nahin",
        "いいえ",
        "否",
        "不",
        "不是",
        "لا",
        "hayır",
        "nie",
    }
)
_STRIP = "*_`'\"“”‘’.,;:!?()[]{}<>«»-–— \t\r\n"


def yes_no(word: str) -> int | None:
    """1 for a yes-word, 0 for a no-word, None otherwise ("Yes", " yes", "YES." are one answer)."""
    w = word.strip(_STRIP).casefold()
    if w in YES_WORDS:
        return 1
    if w in NO_WORDS:
        return 0
    return None


def p_yes_from_token(token: TokenLogprob) -> float | None:
    """P(yes) / (P(yes) + P(no)) over the token's reported alternatives."""
    p_yes = p_no = 0.0
    for alt, logprob in token.top:
        verdict = yes_no(alt)
        if verdict is None or alt.strip(_STRIP) == "":
            continue
        p = math.exp(logprob)
        if verdict:
            p_yes += p
        else:
            p_no += p
    total = p_yes + p_no
    return p_yes / total if total > 0 else None


def first_word(text: str) -> str:
    match = re.search(r"[^\s*_`'\"“”‘’.,;:!?()\[\]{}<>«»\-–—]+", text)
    return match.group(0) if match else ""


def single_answer(completion: Completion) -> float | None:
    """Per-criterion: the answer token's P(yes) when logprobs exist, else 1/0 from the text."""
    if completion.tokens:
        for token in completion.tokens:
            if token.token.strip(_STRIP):  # the first token with content is the answer
                p = p_yes_from_token(token)
                if p is not None:
                    return p
                break
    verdict = yes_no(first_word(completion.text))
    if verdict is None:
        verdict = _sole_verdict(completion.text)
    return None if verdict is None else float(verdict)


# "Q1: Yes", "Q1 - YES", "**Q1:** Yes", "1. yes.", "Question 1: No"
_LINE = re.compile(
    r"^[\s>*_#`-]*(?:q(?:uestion)?\s*)?(\d{1,5})\s*[*_`]*\s*[:.)\-–—=]+\s*[*_`]*\s*(.*)$", re.I
)


@dataclass(frozen=True)
class AnswerSpan:
    number: int
    value: int | None
    start: int  # character offset of the answer word in the text, -1 when none


# The form the prompt asks for, read without the general pattern (the replay hot path).
_CANONICAL = re.compile(r"Q(\d{1,5}): (Yes|No)\r?\n?$")


def answer_lines(text: str) -> dict[int, AnswerSpan]:
    """The first answer given for each question number found in the text."""
    found: dict[int, AnswerSpan] = {}
    offset = 0
    for line in text.splitlines(keepends=True):
        quick = _CANONICAL.match(line)
        if quick:
            number = int(quick.group(1))
            value = 1 if quick.group(2) == "Yes" else 0
            found.setdefault(number, AnswerSpan(number, value, offset + quick.start(2)))
            offset += len(line)
            continue
        match = _LINE.match(line.rstrip("\r\n"))
        if match:
            number = int(match.group(1))
            rest = match.group(2)
            word = first_word(rest)
            value = yes_no(word)
            if value is None:
                value = _sole_verdict(rest)
            start = offset + match.start(2) + rest.find(word) if word and value is not None else -1
            found.setdefault(number, AnswerSpan(number, value, start))
        offset += len(line)
    return found


def numbered_answers(completion: Completion, count: int) -> list[float | None]:
    """Values for Q1..Q{count}: P(yes) at each answer token when logprobs exist, else 1/0."""
    spans = answer_lines(completion.text)
    if not spans and count == 1:
        return [single_answer(completion)]
    if not spans:
        spans = _unnumbered(completion.text, count)
    elif 1 not in spans:
        spans = {**spans, **_leading_answer(completion.text)}
    token_at = _token_offsets(completion) if completion.tokens else {}
    values: list[float | None] = []
    for number in range(1, count + 1):
        span = spans.get(number)
        if span is None or span.value is None:
            values.append(None)
            continue
        p = None
        token = token_at.get(span.start)
        if token is not None:
            p = p_yes_from_token(token)
        values.append(p if p is not None else float(span.value))
    return values


def _unnumbered(text: str, count: int) -> dict[int, AnswerSpan]:
    """Bare "Yes"/"No" lines, taken in order only when there is exactly one per question."""
    spans = []
    offset = 0
    for line in text.splitlines(keepends=True):
        word = first_word(line)
        if word:
            value = yes_no(word)
            if value is None:
                return {}
            spans.append(AnswerSpan(len(spans) + 1, value, offset + line.find(word)))
        offset += len(line)
    return {s.number: s for s in spans} if len(spans) == count else {}


def _leading_answer(text: str) -> dict[int, AnswerSpan]:
    """A bare "No" before the first numbered line answers Q1 (the model continued "Q1:")."""
    first = next((line for line in text.splitlines(keepends=True) if line.strip()), "")
    word = first_word(first)
    value = yes_no(word) if first.strip(_STRIP).casefold() == word.casefold() else None
    if value is None:
        return {}
    return {1: AnswerSpan(1, value, text.find(first) + first.find(word))}


def _token_offsets(completion: Completion) -> dict[int, TokenLogprob]:
    """Map the text offset where each token's visible content starts to the token."""
    at: dict[int, TokenLogprob] = {}
    offset = 0
    for token in completion.tokens or ():
        lead = len(token.token) - len(token.token.lstrip(_STRIP))
        at.setdefault(offset + lead, token)
        offset += len(token.token)
    return at


def _sole_verdict(text: str) -> int | None:
    """The verdict when the text uses yes-words or no-words but not both."""
    words = {yes_no(w) for w in re.findall(r"\w+", text)}
    words.discard(None)
    return words.pop() if len(words) == 1 else None


# -- final verdicts (baseline judges) ---------------------------------------------------------

_FAIL_PHRASES = (
    "not supported",
    "unsupported",
    "not faithful",
    "unfaithful",
    "not attributable",
    "fail",
    "incorrect",
    "hallucinated",
)
_VERDICT_WORDS = {
    "supported": 1,
    "faithful": 1,
    "pass": 1,
    "passes": 1,
    "correct": 1,
    "attributable": 1,
    "grounded": 1,
    "consistent": 1,
    "inconsistent": 0,
}
_LABELLED = re.compile(
    r"(?:final\s+)?(?:verdict|answer|judg(?:e)?ment|decision|label)\s*[:=\-–]\s*"
    r"(.+)$",
    re.I,
)


def verdict_of(phrase: str) -> int | None:
    """1/0 for a verdict phrase ("Yes", "**Not supported**", "FAIL."), None otherwise."""
    text = " ".join(re.sub(r"[*_`\"'“”.,;:!()\[\]]", " ", phrase).casefold().split())
    if not text:
        return None
    for negative in _FAIL_PHRASES:
        if text.startswith(negative):
            return 0
    word = text.split()[0]
    if word in _VERDICT_WORDS:
        return _VERDICT_WORDS[word]
    return yes_no(word)


@dataclass(frozen=True)
class Verdict:
    pred: int | None  # 1 pass, 0 fail, None when no verdict could be read
    prob: float | None  # P(pass) from the verdict token's logprobs when available
    start: int  # offset of the verdict phrase in the text, -1 when none


def final_verdict(completion: Completion) -> Verdict:
    """The verdict on the last line that states one ("Verdict: Yes" preferred)."""
    text = completion.text
    lines = text.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line))
    candidates: list[tuple[int, str]] = []
    for start, line in zip(offsets, lines, strict=False):
        stripped = line.strip()
        labelled = _LABELLED.search(stripped)
        if labelled:
            candidates.append((start + line.find(labelled.group(1)), labelled.group(1)))
    if not candidates:  # no labelled line: the last non-empty line, if it is a bare verdict
        for start, line in reversed(list(zip(offsets, lines, strict=False))):
            if line.strip():
                candidates.append((start + len(line) - len(line.lstrip()), line.strip()))
                break
    for start, phrase in reversed(candidates):
        pred = verdict_of(phrase)
        if pred is not None:
            return Verdict(pred, _verdict_prob(completion, start, pred), start)
    return Verdict(None, None, -1)


def _verdict_prob(completion: Completion, start: int, pred: int) -> float | None:
    if not completion.tokens:
        return None
    token = _token_offsets(completion).get(start + _lead(completion.text[start:]))
    p = p_yes_from_token(token) if token is not None else None
    return p if p is not None else None


def _lead(text: str) -> int:
    return len(text) - len(text.lstrip(_STRIP))


# -- pointwise scores and pairwise choices (CE-Judge's LitEval and MM-Eval settings) ------------

_SCORE_LINE = re.compile(r"\bscore\s*[:=]\s*\**\s*(\d+)(?:\s*/\s*\d+)?", re.I)
_CHOICE_LINE = re.compile(
    r"(?:verdict|choice|answer|winner|better(?:\s+response)?)\s*[:=]\s*\**\s*"
    r"(?:\[\s*)?(?:response|assistant)?\s*([AB])\b",
    re.I,
)


def final_score(text: str, low: int, high: int) -> int | None:
    """The integer of the last `Score: X` in the text, when it lies on the scale."""
    matches = _SCORE_LINE.findall(text)
    if not matches:
        return None
    value = int(matches[-1])
    return value if low <= value <= high else None


def final_choice(text: str) -> str | None:
    """ "a" or "b" from the last `Verdict: A` / `Verdict: B` (or a bare last line "A"/"B")."""
    matches = _CHOICE_LINE.findall(text)
    if matches:
        return matches[-1].lower()
    last = next((line.strip(_STRIP) for line in reversed(text.splitlines()) if line.strip()), "")
    return last.lower() if last in ("A", "B") else None


def expected_score(completion: Completion, low: int, high: int) -> float | None:
    """A one-integer answer on the scale: the expected score under the first answer token's
    alternatives that are on the scale (G-Eval's reading), or the written integer when the
    response has no logprobs or the scale has two-digit scores."""
    if completion.tokens and high < 10:
        token = next((t for t in completion.tokens if t.token.strip(_STRIP)), None)
        if token is not None:
            weights: dict[int, float] = {}
            for alt, logprob in token.top:
                text = alt.strip(_STRIP)
                if text.isdigit() and low <= int(text) <= high:
                    weights[int(text)] = weights.get(int(text), 0.0) + math.exp(logprob)
            total = sum(weights.values())
            if total > 0:
                return sum(score * w for score, w in weights.items()) / total
    match = re.search(r"\d+", completion.text)
    if match is None or not low <= int(match.group()) <= high:
        return None
    return float(match.group())


def first_choice(completion: Completion) -> str | None:
    """The likelier of A and B among the first answer token's alternatives (read as P(yes) is
    for a yes/no answer), else an answer that starts with the letter ("B", "A.", "**A**") or
    ends with a `Verdict: A` line; "a", "b" or None."""
    token = next((t for t in completion.tokens or () if t.token.strip(_STRIP)), None)
    if token is not None:
        weights = {"A": 0.0, "B": 0.0}
        for alt, logprob in token.top:
            if alt.strip(_STRIP) in weights:
                weights[alt.strip(_STRIP)] += math.exp(logprob)
        if weights["A"] or weights["B"]:
            return "a" if weights["A"] >= weights["B"] else "b"
    word = first_word(completion.text).strip(_STRIP)
    return word.lower() if word in ("A", "B") else final_choice(completion.text)
