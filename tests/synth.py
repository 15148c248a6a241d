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


# -- pointwise (translation quality 1-7) and pairwise (chat responses) sets --------------------

_SOURCES = {
    "de": "Der Fluss {k} fließt langsam durch das stille Tal.",
    "en": "River {k} flows slowly through the quiet valley.",
}
_TRANSLATIONS = {
    "en": "River {k} flows slowly through the quiet valley",
    "de": "Der Fluss {k} fließt langsam durch das stille Tal",
    "fr": "La rivière {k} coule lentement à travers la vallée tranquille",
}
_PROMPTS = {
    "en": ("How long should egg {k} boil?", "Boil it for {m} minutes"),
    "de": ("Wie lange soll Ei {k} kochen?", "Koche es {m} Minuten lang"),
    "fr": ("Combien de temps faut-il cuire l'œuf {k} ?", "Fais-le cuire {m} minutes"),
}


def write_translations(path: Path, lang: str, n: int) -> dict[str, float]:
    """n translations into `lang` rated 1-7 (LitEval layout); returns text -> quality in [0, 1]."""
    source_lang = "de" if lang == "en" else "en"
    quality = {}
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            score = 1 + int(unit(lang, i, "score") * 7)
            text = _TRANSLATIONS[lang].format(k=i) + f". [{lang}{i}]"
            record = {
                "id": f"{source_lang}-{lang}-{i:03d}",
                "lang": lang,
                "pair": f"{source_lang}-{lang}",
                "source": _SOURCES[source_lang].format(k=i),
                "translation": text,
                "score": score,
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            quality[text] = (score - 1) / 6
    return quality


def write_pairs(path: Path, lang: str, n: int) -> dict[str, float]:
    """n prompts with two responses of hidden quality (MM-Eval layout, subsets chat and
    reasoning); the better one is preferred. Returns text -> quality in [0, 1]."""
    prompt, answer = _PROMPTS[lang]
    quality = {}
    with path.open("w", encoding="utf-8") as out:
        for i in range(n):
            qa, qb = unit(lang, i, "a"), unit(lang, i, "b")
            a = answer.format(m=4 + i % 7) + f". [{lang}{i}a]"
            b = answer.format(m=5 + i % 5) + f". [{lang}{i}b]"
            record = {
                "id": f"{lang}-{i:03d}",
                "lang": lang,
                "subset": "chat" if i % 2 else "reasoning",
                "prompt": prompt.format(k=i),
                "response_a": a,
                "response_b": b,
                "preference": "a" if qa > qb else "b",
            }
            out.write(json.dumps(record, ensure_ascii=False) + "\n")
            quality |= {a: qa, b: qb}
    return quality


class ScriptedJudge:
    """Answers gen, score and CE-Judge prompts like a model that notices an output's quality
    (a binary label, or a value in [0, 1]) in two concepts and not in the others. Its CE-Judge
    pairwise verdicts favour the first position when the two responses are close."""

    def __init__(self, quality: dict[str, float]) -> None:
        self.labels = quality

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
        if ending == "Translation:":
            return Reply(text=re.search(r"<data>\n(.*?)\n</data>", prompt, re.S).group(1))
        outputs = re.findall(r"<output>\n(.*?)\n</output>", prompt, re.S)
        if '"Verdict: A" or "Verdict: B"' in ending:
            first, second = (self.labels[o] for o in outputs)
            choice = "A" if first >= second or abs(first - second) < 0.3 else "B"
            return Reply(text=f"Both responses answer the prompt.\nVerdict: {choice}")
        if ending.endswith("Answer with the letter A or B only."):
            first, second = (self.labels[o] for o in outputs)
            choice = "A" if first >= second or abs(first - second) < 0.2 else "B"
            return Reply(tokens=[(choice, {choice: 0.9, "B" if choice == "A" else "A": 0.1})])
        if ending.startswith("Answer with the score only"):
            gold = 1 + 6 * self.labels[outputs[0]]
            guess = min(7, max(1, round(gold + 3 * unit(outputs[0], "zs") - 1.5)))
            near = min(7, guess + 1) if guess < 7 else guess - 1
            return Reply(tokens=[(str(guess), {str(guess): 0.7, str(near): 0.3})])
        if '"Score: X"' in ending:
            gold = 1 + round(6 * self.labels[outputs[0]])
            noisy = min(7, max(1, gold + round(2 * unit(outputs[0], "ce") - 1)))
            return Reply(text=f"The translation keeps most of the meaning.\nScore: {noisy}")
        output = outputs[0]
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
    def _p_yes(question: str, output: str, label: float) -> float:
        concept = re.search(r"satisfy (\w+) check", question).group(1).capitalize()
        if concept in SIGNAL:
            base = {0: 0.15, 1: 0.85}.get(label, 0.15 + 0.7 * label)
            return round(min(0.99, max(0.01, base + 0.2 * (unit(question, output) - 0.5))), 4)
        return round(0.05 + 0.9 * unit(question, output, "noise"), 4)


# -- scores with a per-language lenient judge (transfer shift) --------------------------------


def synthetic_criteria():
    """The scripted judge's concepts and questions as a criteria set."""
    from ucsj.criteria import build_criteria

    return build_criteria(
        "rag-faithfulness",
        [(name, description, QUESTIONS[name]) for name, description in CONCEPTS.items()],
        {},
    )


def lenient_scores(
    lang: str,
    n: int,
    *,
    lenient: float = 0.0,
    pass_rate: float = 0.55,
    spread: float = 0.2,
    lenient_on: set[str] | None = None,
    model: str = "m",
) -> list[dict]:
    """Scores records of n samples answered like the scripted judge (the label in Attribution
    and Consistency, P(yes) 0.85 or 0.15 give or take spread / 2; noise in the others), except
    that the judge turns a share `lenient` of its "no" answers (P(yes) < 0.5) into "yes"
    (1 - P(yes)), on every question or those of `lenient_on`. `pass_rate` is the share of
    faithful samples: a genuinely better or worse language moves it."""
    criteria = synthetic_criteria()
    signal = {q.id for c in criteria.concepts if c.name in SIGNAL for q in c.questions}
    rows = []
    for i in range(n):
        label = int(unit(lang, i, "label") < pass_rate)
        z = {}
        for q in criteria.questions:
            if q.id in signal:
                p = (0.85 if label else 0.15) + spread * (unit(lang, i, q.id) - 0.5)
            else:
                p = 0.05 + 0.9 * unit(lang, i, q.id, "noise")
            p = round(min(0.99, max(0.01, p)), 4)
            biased = lenient_on is None or q.id in lenient_on
            if biased and p < 0.5 and unit(lang, i, q.id, "lenient") < lenient:
                p = round(1 - p, 4)
            z[q.id] = p
        s = {
            c.id: round(sum(z[q.id] for q in c.questions) / len(c.questions), 6)
            for c in criteria.concepts
        }
        rows.append(
            {
                "id": f"{lang}-{i:04d}",
                "lang": lang,
                "label": label,
                "z": z,
                "s": s,
                "criteria": criteria.fingerprint,
                "model": model,
                "scoring": "per-concept",
                "answers": {},
                "usage": {},
            }
        )
    return rows


def write_scores(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows))
    return path
