"""Text similarity metrics of OpenAI's ``text_similarity`` grader, from the libraries that define them.

========================  ==============================================================
metric                    computed as
========================  ==============================================================
``fuzzy_match``           rapidfuzz ``fuzz.ratio(input, reference) / 100``
``bleu``                  sacrebleu ``sentence_bleu(input, [reference]).score / 100``
``gleu``                  NLTK ``sentence_gleu([reference words], input words)``
``meteor``                NLTK ``meteor_score([reference words], input words)`` with WordNet
``rouge_1`` … ``rouge_5``  rouge-score ``RougeScorer(["rougeN"])`` F-measure (reference, input)
``rouge_l``               rouge-score ``RougeScorer(["rougeL"])`` F-measure
``cosine``                cosine of the two texts' embeddings (an embeddings endpoint)
========================  ==============================================================

Words are the texts split on whitespace. Each text is read to its first
:data:`MAX_METRIC_CHARS` characters, and ROUGE-L to its first :data:`MAX_LCS_WORDS`
words (its cost grows with the product of the lengths), so a hostile reply costs
bounded time; the grader runs the metric on a worker thread. The libraries are the ``graders`` extra
(``pip install 'evalhydra[graders]'``), imported when a metric is first used;
METEOR also needs WordNet's data: NLTK's own (``python -m nltk.downloader
wordnet``) or Debian's ``wordnet-base`` package.
"""

from __future__ import annotations

import importlib
import math
import shutil
import tempfile
import warnings
from collections.abc import Callable, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from evalhydra.core.errors import EvalHydraError

__all__ = ["LOCAL_METRICS", "MAX_LCS_WORDS", "MAX_METRIC_CHARS", "METRICS", "cosine", "missing_library",
           "similarity"]

#: Every metric a ``text_similarity`` grader may name.
METRICS = ("fuzzy_match", "bleu", "gleu", "meteor", "rouge_1", "rouge_2", "rouge_3", "rouge_4", "rouge_5",
           "rouge_l", "cosine")
#: The metrics computed here (``cosine`` needs an embeddings endpoint).
LOCAL_METRICS = METRICS[:-1]
#: The library each metric needs (its import name, and the distribution to install).
_LIBRARIES = {"fuzzy_match": ("rapidfuzz", "rapidfuzz"), "bleu": ("sacrebleu", "sacrebleu"),
              "gleu": ("nltk", "nltk"), "meteor": ("nltk", "nltk"), "rouge": ("rouge_score", "rouge-score")}
#: Where Debian's wordnet-base puts WordNet 3.0.
DEBIAN_WORDNET = Path("/usr/share/wordnet")
#: WordNet 3.0's lexicographer file names (its ``lexnames`` file, which NLTK reads and Debian's
#: package does not ship), in file-number order.
_LEXNAMES = [
    "adj.all", "adj.pert", "adv.all", "noun.Tops", "noun.act", "noun.animal", "noun.artifact",
    "noun.attribute", "noun.body", "noun.cognition", "noun.communication", "noun.event",
    "noun.feeling", "noun.food", "noun.group", "noun.location", "noun.motive", "noun.object",
    "noun.person", "noun.phenomenon", "noun.plant", "noun.possession", "noun.process",
    "noun.quantity", "noun.relation", "noun.shape", "noun.state", "noun.substance", "noun.time",
    "verb.body", "verb.change", "verb.cognition", "verb.communication", "verb.competition",
    "verb.consumption", "verb.contact", "verb.creation", "verb.emotion", "verb.motion",
    "verb.perception", "verb.possession", "verb.social", "verb.stative", "verb.weather", "adj.ppl",
]
_POS = {"adj": 3, "adv": 4, "noun": 1, "verb": 2}


def _library(metric: str) -> str:
    return _LIBRARIES["rouge" if metric.startswith("rouge") else metric][0]


def missing_library(metric: str) -> str | None:
    """Why ``metric`` cannot be computed here (a library or WordNet missing, with the fix), or None."""
    if metric == "cosine":
        return None
    name, distribution = _LIBRARIES["rouge" if metric.startswith("rouge") else metric]
    try:
        importlib.import_module(name)
    except ImportError:
        return (f"text_similarity metric '{metric}' needs {distribution}: "
                "pip install 'evalhydra[graders]'")
    if metric == "meteor" and _wordnet_folder() is None:
        return ("text_similarity metric 'meteor' needs WordNet's data: python -m nltk.downloader wordnet,"
                " or apt-get install wordnet-base")
    return None


def similarity(metric: str, text: str, reference: str) -> float:
    """``metric`` of ``text`` against ``reference``, in [0, 1] (see the module's table).

    Raises:
        EvalHydraError: The metric's library (or WordNet) is missing.
    """
    problem = missing_library(metric)
    if problem:
        raise EvalHydraError(problem)
    text, reference = _bounded(metric, text), _bounded(metric, reference)
    return _COMPUTE[metric[:5] if metric.startswith("rouge") else metric](metric, text, reference)


#: The most characters of either text a metric reads (the rest is left out).
MAX_METRIC_CHARS = 100_000
#: The most words of either text ROUGE-L reads: its longest common subsequence takes time in
#: the product of the two lengths.
MAX_LCS_WORDS = 2_000


def _bounded(metric: str, text: str) -> str:
    """``text`` cut to what ``metric`` reads in bounded time (a hostile reply can be huge)."""
    text = text[:MAX_METRIC_CHARS]
    if metric == "rouge_l":
        words = text.split(maxsplit=MAX_LCS_WORDS)
        if len(words) > MAX_LCS_WORDS:
            text = " ".join(words[:MAX_LCS_WORDS])
    return text


def _fuzzy(metric: str, text: str, reference: str) -> float:
    from rapidfuzz import fuzz

    return float(fuzz.ratio(text, reference)) / 100.0


def _bleu(metric: str, text: str, reference: str) -> float:
    import sacrebleu

    return float(sacrebleu.sentence_bleu(text, [reference]).score) / 100.0


def _gleu(metric: str, text: str, reference: str) -> float:
    from nltk.translate.gleu_score import sentence_gleu

    return float(sentence_gleu([reference.split()], text.split()))


def _meteor(metric: str, text: str, reference: str) -> float:
    from nltk.translate.meteor_score import meteor_score

    return float(meteor_score([reference.split()], text.split(), wordnet=_wordnet()))


def _rouge(metric: str, text: str, reference: str) -> float:
    return float(_rouge_scorer(metric).score(reference, text)[_rouge_key(metric)].fmeasure)


def _rouge_key(metric: str) -> str:
    return "rougeL" if metric == "rouge_l" else "rouge" + metric.removeprefix("rouge_")


@cache
def _rouge_scorer(metric: str) -> Any:
    from rouge_score import rouge_scorer

    return rouge_scorer.RougeScorer([_rouge_key(metric)])


_COMPUTE: dict[str, Callable[[str, str, str], float]] = {
    "fuzzy_match": _fuzzy, "bleu": _bleu, "gleu": _gleu, "meteor": _meteor, "rouge": _rouge}


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    """The cosine of two vectors (0 when either is zero); each is scaled by its largest component
    first, so components near the float range cannot overflow to a NaN."""
    a, b = _unit_scaled(a), _unit_scaled(b)
    dot = math.fsum(x * y for x, y in zip(a, b, strict=True))
    norm = math.sqrt(math.fsum(x * x for x in a)) * math.sqrt(math.fsum(y * y for y in b))
    return dot / norm if norm else 0.0


def _unit_scaled(vector: Sequence[float]) -> list[float]:
    largest = max((abs(x) for x in vector), default=0.0)
    return [x / largest for x in vector] if largest and math.isfinite(largest) else list(vector)


def _nltk_has_wordnet() -> bool:
    import nltk

    try:
        nltk.data.find("corpora/wordnet")
    except LookupError:
        return False
    return True


@cache
def _wordnet_folder() -> Path | None:
    """Where WordNet 3.0 is read from: NLTK's own data (its path), else Debian's files copied
    into a folder beside the ``lexnames`` index NLTK also wants; None when neither is here."""
    if _nltk_has_wordnet():
        return Path("nltk_data")  # found through NLTK's own search path
    if not (DEBIAN_WORDNET / "data.noun").is_file():
        return None
    folder = Path(tempfile.gettempdir()) / "evalhydra-wordnet"
    folder.mkdir(exist_ok=True)
    for source in DEBIAN_WORDNET.iterdir():  # copies: NLTK reads no link that leaves its folder
        target = folder / source.name
        if source.is_file() and (not target.is_file() or target.stat().st_size != source.stat().st_size):
            shutil.copyfile(source, target)
    (folder / "lexnames").write_text("".join(
        f"{number:02d}\t{name}\t{_POS[name.split('.')[0]]}\n" for number, name in enumerate(_LEXNAMES)))
    return folder


@cache
def _wordnet() -> Any:
    import nltk

    if _nltk_has_wordnet():
        from nltk.corpus import wordnet

        return wordnet
    from nltk.corpus.reader.wordnet import WordNetCorpusReader

    class WordNet30(WordNetCorpusReader):
        """WordNet 3.0 from Debian's files: NLTK's own reference WordNet, so nothing to map."""

        def map_wn(self, version: str = "wordnet") -> None:
            return None

    folder = str(_wordnet_folder())
    if folder not in nltk.data.path:
        nltk.data.path.append(folder)  # NLTK reads only below its data paths
    with warnings.catch_warnings():  # that Open Multilingual WordNet is absent: METEOR needs none
        warnings.simplefilter("ignore", UserWarning)
        return WordNet30(folder, None)
