"""A synthetic multilingual faithfulness set and a scripted judge whose answers carry the label
in some concepts and noise in others. Written for the tests; deterministic."""

from __future__ import annotations

import hashlib
import json
import re
from pathlib import Path

from fakeserver import Reply, answer_lines

CONCEPTS = {
    "Attribution": "claims are stated in the passages",
    "Consistency": "nothing contradicts the passages",
    "Fluency": "the sentence reads well",
    "Style": "the tone suits the question",
}
SIGNAL = {"Attribution", "Consistency"}
QUESTIONS = {
    name: [f"Does the answer satisfy {name.lower()} check {i}?" for i in (1, 2, 3)]
    for name in CONCEPTS
}
_TEMPLATES = {
    "en": ("The bridge was opened in {y}.", "When was bridge {k} opened?", "It opened in {a}."),
    "fr": (
        "Le pont a été ouvert en {y}.",
        "Quand le pont {k} a-t-il ouvert ?",
        "Il a ouvert en {a}.",
    ),
    "de": (
        "Die Brücke wurde {y} eröffnet.",
        "Wann wurde Brücke {k} eröffnet?",
        "Sie wurde {a} eröffnet.",
    ),
    "es": ("El puente se abrió en {y}.", "¿Cuándo se abrió el puente {k}?", "Se abrió en {a}."),
}


def unit(*parts: object) -> float:
    """A deterministic pseudo-random number in [0, 1)."""
    digest = hashlib.sha256("|".join(map(str, parts)).encode()).digest()
    return int.from_bytes(digest[:8], "big") / 2**64


def write_dataset(path: Path, lang: str, n: int, with_lang: bool = True) -> dict[str, int]:
    """n samples of `lang`, about half faithful; returns answer text -> label."""
    source, query, answer = _TEMPLATES[lang]
    labels = {}
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            year = 1900 + i
            label = int(unit(lang, i, "label") < 0.55)
            said = year if label else year + 7
            text = answer.format(a=said) + f" [{lang}{i}]"
            record = {
                "id": f"{lang}-{i:03d}",
                "context": [source.format(y=year), "Other passage."],
                "query": query.format(k=i),
                "answer": text,
                "label": label,
            }
            if with_lang:
                record["lang"] = lang
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            labels[text] = label
    return labels


class ScriptedJudge:
    """Answers gen and score prompts like a model that notices faithfulness in two concepts."""

    def __init__(self, labels: dict[str, int]) -> None:
        self.labels = labels

    def __call__(self, body: dict) -> Reply:
        prompt = body["messages"][-1]["content"]
        ending = prompt.rstrip().rsplit("\n", 1)[-1]
        if ending == "Concepts:":
            return Reply(
                text="\n".join(f"{i}. {n}: {d}" for i, (n, d) in enumerate(CONCEPTS.items(), 1))
            )
        if ending == "Questions:":
            name = re.search(r"^Concept: (\w+)", prompt, re.M).group(1)
            return Reply(text="\n".join(f"{i}. {q}" for i, q in enumerate(QUESTIONS[name], 1)))
        if ending == "Checklist:":
            lines = []
            for name in CONCEPTS:
                lines.append(f"Concept: {name}")
                lines += [f"{i}. {q}" for i, q in enumerate(QUESTIONS[name], 1)]
            return Reply(text="\n".join(lines))
        output = re.search(r"<output>\n(.*?)\n</output>", prompt, re.S).group(1)
        label = self.labels[output]
        questions = re.findall(r"^(?:Q\d+\. |Question: )(.*)$", prompt, re.M)
        probs = [self._p_yes(q, output, label) for q in questions]
        if body["max_tokens"] == 1:
            p = probs[0]
            return Reply(
                tokens=[(" Yes" if p >= 0.5 else " No", {" Yes": p, " No": 1 - p})],
                finish_reason="length",
            )
        return answer_lines(probs)

    @staticmethod
    def _p_yes(question: str, output: str, label: int) -> float:
        concept = re.search(r"satisfy (\w+) check", question).group(1).capitalize()
        if concept in SIGNAL:
            base = 0.85 if label else 0.15
            return round(min(0.99, max(0.01, base + 0.2 * (unit(question, output) - 0.5))), 4)
        return round(0.05 + 0.9 * unit(question, output, "noise"), 4)
