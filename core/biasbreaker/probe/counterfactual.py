"""Counterfactual generation: swap demographic terms and names in text and JSON-like payloads.

A *counterfactual* of a payload changes who it is about and nothing else: "his" becomes "her",
"Jamal Washington" becomes "Ebony Washington" (gender) or "Brian Schmidt" (race), "a Muslim
man" becomes "a Hindu man". The generator

* finds protected mentions (:meth:`CounterfactualGenerator.detect`) along the configured axes;
* draws ``k`` variants, each a *permutation* of one axis's groups (gender: male ↔ female;
  race: e.g. black → white, white → black), deterministically from the seed and the payload
  (:meth:`~CounterfactualGenerator.generate`);
* returns each variant with the mapping used, so an output of the step run on the variant can
  be mapped back (:meth:`~CounterfactualGenerator.map_back`) before it is compared with the
  original output;
* reports a payload without protected mentions as *not applicable* (fairness through
  unawareness: there is nothing to swap), never as "no bias".

Payloads are ``str``, ``dict`` (values are rewritten, keys are not), ``list`` and ``tuple``,
nested; other values pass through untouched. The text is never lower-cased: only the swapped
words change, and each takes the capitalisation of the word it replaces (``He`` → ``She``,
``HIS`` → ``HER``).

Swap rules (sources in ``docs/detection.md``):

* Whole words and multi-word terms only (``his`` never matches inside ``this``); the longest
  term wins (``African American`` before ``American``).
* Gender pronouns follow grammar: ``his`` → ``her`` before a noun and ``hers`` otherwise;
  ``her`` → ``his`` before a noun and ``him`` otherwise (after *give/tell/show/let/make…*
  it is always ``him``); ``hers`` → ``his``; ``himself`` ↔ ``herself``. The cue is the next
  word: a noun or adjective makes the pronoun a determiner, punctuation, the end of the text
  or a function word (*to*, *the*, *and*, *about*…) makes it stand alone.
* Titles ``Mr.``/``Mr`` ↔ ``Ms.``/``Mrs.``/``Miss`` (a swap back restores the title the
  text had); spouse, kin and in-law terms (wife ↔ husband, mother ↔ father, son ↔ daughter …).
* Context-dependent terms (``black``, ``white``, ``asian``, ``old``, ``young``, ``straight``,
  ``deaf`` …) count only before a person word or "one(s)" (``a black doctor``, ``the straight
  one``), when coordinated with such a term (``a gay and a straight couple``), and some after a
  copula (``she is straight``); ``the black car`` is left alone.
* ``a``/``an`` before a swapped word is corrected (``an Asian man`` → ``a white man``).
* First and full names are swapped by group (gender × race) from the shipped name lists:
  a gender swap keeps the surname (``Jamal Washington`` → ``Ebony Washington``), a race swap
  draws a full name of the same gender from the target group; a name maps to one name
  throughout the payload.
* Ages: ``22-year-old`` ↔ ``78-year-old`` (``n`` ↔ ``100 − n`` for ``n ≤ 39`` or ``n ≥ 61``).
"""

from __future__ import annotations

import hashlib
import itertools
import json
import random
import re
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Literal

from biasbreaker.probe.terms import Axis, NameBook, NameInfo, TermRow, TermSet

__all__ = [
    "CounterfactualGenerator",
    "CounterfactualMapping",
    "CounterfactualSet",
    "Detection",
    "Path",
    "Substitution",
    "Variant",
    "payload_digest",
]

Path = tuple[str | int, ...]
"""Where a string sits in a payload: dict keys and list indices from the root."""

_MASK = "[MASK]"
_MAX_ENUMERATED = 5000

# Words after which a pronoun or adjective-noun ambiguous form stands alone (not before a noun).
_FUNCTION_WORDS = frozenset(
    """
    a an the this that these those my your his her its our their some any no every each
    either neither all both few many much more most other another such what which whose to
    of in on at by for with from about into onto upon over under above below across along
    around through during before after since until till than as like near off out up down
    away back behind beside besides between beyond against among toward towards within
    without via per and or but nor so yet because if when while whereas although though
    unless whether once where why how then now today tonight tomorrow yesterday here there
    again also too very just only even still already soon later always never ever often
    sometimes usually really quite rather almost well maybe perhaps instead anyway else i me
    you he him she it we us they them myself yourself himself herself itself ourselves
    themselves who whom whoever someone somebody anyone anybody everyone everybody nobody
    nothing something anything everything is are was were am be been being has have had do
    does did will would shall should can could may might must ought not n't 's 're 've 'd
    'll 'm
    """.split()  # noqa: SIM905
)
# Verbs after which "her" is the object even before a noun ("gave her flowers", "let her go").
_OBJECT_VERBS = frozenset(
    """
    give gives gave giving given tell tells told telling show shows showed showing shown
    send sends sent sending offer offers offered offering buy buys bought buying ask asks
    asked asking teach teaches taught teaching hand hands handed handing bring brings
    brought bringing pay pays paid paying owe owes owed promise promises promised lend lends
    lent wish wishes wished let lets letting make makes made making help helps helped
    helping
    """.split()  # noqa: SIM905
)
_COPULAS = frozenset(
    """
    is are was were am be been being seem seems seemed become becomes became 's 're ’s ’re
    identifies identify identified
    """.split()  # noqa: SIM905
)
_LANGUAGE_VERBS = frozenset(
    """
    speak speaks spoke speaking spoken learn learns learned learnt learning fluent translate
    translates translated translating
    """.split()  # noqa: SIM905
)
_ONE = frozenset({"one", "ones"})
_POSSESSIVE = re.compile(r"['’]s?$")
_COORDINATED = re.compile(r"\s*,?\s*(?:and|or|nor)\s+(?:(?:a|an|the)\s+)?[\w'’-]+\s+(\w+)", re.I)
_WORD_AFTER = re.compile(r"\s*(?:(\w[\w'’]*)|(\S))?")
_WORD_BEFORE = re.compile(r"(?:(\w[\w'’]*)|(\S))?\s*$")
_ARTICLE_BEFORE = re.compile(r"(?<![\w'’-])(an?)(\s+)$", re.IGNORECASE)
_AGE_RE = re.compile(
    r"(?<![\w.-])(\d{1,3})(\s*-\s*|\s+)(years?)(\s*-\s*|\s+)(old)(?![\w-])", re.IGNORECASE
)


@dataclass(frozen=True, slots=True)
class Detection:
    """One protected mention found in a payload.

    Args:
        path: Where the string sits in the payload (``()`` for a plain string).
        start: Character offset of the mention in that string (inclusive).
        end: Character offset after the mention.
        surface: The mention as written.
        axis: The axis it belongs to (a name may be reported twice: gender and race).
        groups: The group(s) of that axis it names; more than one for a shared form such as
            ``church``, which alone does not make a payload applicable.
        kind: ``"term"``, ``"name"`` or ``"age"``.
    """

    path: Path
    start: int
    end: int
    surface: str
    axis: str
    groups: tuple[str, ...]
    kind: Literal["term", "name", "age"]


@dataclass(frozen=True, slots=True)
class CounterfactualMapping:
    """The mapping one variant applied, enough to map an output back.

    Args:
        axis: The swapped axis.
        groups: ``(from_group, to_group)`` pairs of the groups it moves (a permutation for
            variants drawn by :meth:`CounterfactualGenerator.generate`).
        names: ``(original, replacement)`` name strings (full names, first names, surnames),
            Title-cased.
        prefer: ``(replacement, original)`` term surfaces as written, used when mapping back:
            a replacement found verbatim in an output returns to exactly the original word
            (``Mr.`` back to ``Mrs.`` rather than ``Ms.``, ``Black people`` back to
            ``white people``).
        invertible: False when the payload already mentioned a target group, so its
            mentions cannot be told from the swapped ones (a ``to_group`` variant of a text
            mentioning both genders).
    """

    axis: str
    groups: tuple[tuple[str, str], ...]
    names: tuple[tuple[str, str], ...] = ()
    prefer: tuple[tuple[str, str], ...] = ()
    invertible: bool = True

    def inverse(self) -> CounterfactualMapping:
        """The mapping that undoes this one.

        Raises:
            ValueError: The mapping sends two groups (or two names) to one, so it has no
                inverse (e.g. a :meth:`CounterfactualGenerator.to_group` variant of a text
                that mentions both groups).
        """
        targets = [t for _, t in self.groups]
        name_targets = [t for _, t in self.names]
        if (
            not self.invertible
            or len(set(targets)) != len(targets)
            or len(set(name_targets)) != len(name_targets)
        ):
            raise ValueError(
                f"mapping {self.groups!r} on axis {self.axis!r} is not one-to-one (or the payload "
                "already mentioned a target group), so it cannot be inverted; map outputs back "
                "only for variants drawn by generate()"
            )
        return CounterfactualMapping(
            axis=self.axis,
            groups=tuple((t, s) for s, t in self.groups),
            names=tuple((t, s) for s, t in self.names),
            prefer=(),
        )

    def to_dict(self) -> dict[str, Any]:
        """A JSON-serialisable form."""
        return {
            "axis": self.axis,
            "groups": [list(p) for p in self.groups],
            "names": [list(p) for p in self.names],
            "prefer": [list(p) for p in self.prefer],
            "invertible": self.invertible,
        }


@dataclass(frozen=True, slots=True)
class Substitution:
    """One replaced span: where, what it was and what it became."""

    path: Path
    start: int
    end: int
    original: str
    replacement: str


@dataclass(frozen=True)
class Variant:
    """One counterfactual payload with the mapping that produced it.

    Args:
        payload: The rewritten payload (same structure as the input).
        mapping: The mapping applied.
        substitutions: Every replaced span, in order (article corrections not included).
        draw: 0 for the first variant of this mapping, 1 for its second draw, … (later draws
            differ in the names drawn and in the sample index the probe uses).
    """

    payload: Any
    mapping: CounterfactualMapping
    substitutions: tuple[Substitution, ...]
    draw: int = 0


@dataclass(frozen=True)
class CounterfactualSet:
    """The result of :meth:`CounterfactualGenerator.generate`.

    Args:
        status: ``"applicable"`` when variants were produced, else ``"not_applicable"``.
        detections: The protected mentions found.
        variants: ``k`` variants when applicable, else empty.
        reason: Why it is not applicable (empty when applicable).
    """

    status: Literal["applicable", "not_applicable"]
    detections: tuple[Detection, ...]
    variants: tuple[Variant, ...]
    reason: str = ""


@dataclass(frozen=True, slots=True)
class _Hit:
    start: int
    end: int
    surface: str
    kind: Literal["term", "name", "age"]
    axis: str
    groups: tuple[str, ...]
    name: str = ""


@dataclass
class _Compiled:
    terms: re.Pattern[str] | None
    names: re.Pattern[str] | None
    axis_of: dict[str, Axis]
    name_key: dict[str, str] = field(default_factory=dict)


class CounterfactualGenerator:
    """Detect protected mentions and produce counterfactual variants of payloads.

    Deterministic: the variants depend only on the term set, the axes, the seed and the
    payload (not on call order), so the same inputs give byte-identical variants.

    Args:
        terms: The term lists (default :meth:`TermSet.default`).
        axes: Axis names to use, in the order variants are drawn (default: all of ``terms``).
        seed: Seed of every random choice (which permutations, which names).

    Raises:
        KeyError: An axis in ``axes`` is not in ``terms``.
    """

    def __init__(
        self, terms: TermSet | None = None, *, axes: Sequence[str] | None = None, seed: int = 0
    ) -> None:
        self.terms = terms if terms is not None else TermSet.default()
        names = tuple(axes) if axes is not None else self.terms.axis_names
        self.axes: tuple[Axis, ...] = tuple(self.terms.axis(a) for a in names)
        self.seed = seed
        self._compiled = _compile(self.axes, self.terms.names)

    # ------------------------------------------------------------------ detection
    def detect(self, payload: Any) -> tuple[Detection, ...]:
        """Find the protected mentions in a payload.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.

        Returns:
            The mentions, in payload order then text order. A name is reported once per axis
            it informs (gender and/or race).
        """
        found: list[Detection] = []
        for path, text in _leaves(payload):
            for hit in self._scan(text):
                if hit.kind == "name":
                    found.extend(self._name_detections(path, hit))
                else:
                    found.append(
                        Detection(
                            path, hit.start, hit.end, hit.surface, hit.axis, hit.groups, hit.kind
                        )
                    )
        return tuple(found)

    def _name_detections(self, path: Path, hit: _Hit) -> list[Detection]:
        info = self._name_info(hit.name)
        out: list[Detection] = []
        if info is None:
            return out
        axis_names = {a.name for a in self.axes}
        if info.gender is not None and "gender" in axis_names:
            out.append(
                Detection(path, hit.start, hit.end, hit.surface, "gender", (info.gender,), "name")
            )
        if info.race is not None and "race" in axis_names:
            out.append(
                Detection(path, hit.start, hit.end, hit.surface, "race", (info.race,), "name")
            )
        return out

    def _name_info(self, name: str) -> NameInfo | None:
        book = self.terms.names
        if book is None:
            return None
        return book.full.get(name) or book.first.get(name)

    # ------------------------------------------------------------------ generation
    def generate(self, payload: Any, k: int) -> CounterfactualSet:
        """Draw ``k`` counterfactual variants of a payload.

        Each variant permutes the groups of one axis mentioned in the payload. Candidate
        permutations are shuffled per axis from the seed and the payload, then taken round
        robin across axes (in axis order) so the variants cover every mentioned axis; when
        there are fewer distinct permutations than ``k``, they are drawn again (``draw`` 1,
        2, …) with fresh names.

        Args:
            payload: ``str`` or a nested ``dict``/``list``/``tuple`` of them.
            k: Number of variants, >= 1.

        Returns:
            ``k`` variants, or a ``not_applicable`` set when nothing can be swapped.

        Raises:
            ValueError: ``k < 1``.
        """
        if k < 1:
            raise ValueError(f"k={k!r} must be >= 1 (the number of counterfactual variants)")
        detections = self.detect(payload)
        present = _present_groups(detections)
        if not present:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason=(
                    "no protected term or name of axes "
                    f"{', '.join(a.name for a in self.axes)} found: the payload is group-blind "
                    "(fairness through unawareness), so a counterfactual test does not apply"
                ),
            )
        digest = payload_digest(payload)
        per_axis: list[list[tuple[str, dict[str, str]]]] = []
        for axis in self.axes:
            groups = present.get(axis.name)
            if not groups:
                continue
            rng = random.Random(f"{self.seed}:{digest}:{axis.name}:order")
            cands = [
                (axis.name, pi)
                for pi in _candidate_permutations(axis.groups, groups, rng)
                if self._feasible(axis, pi, detections)
            ]
            if cands:
                per_axis.append(cands)
        if not per_axis:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but none has a counterpart in another group",
            )
        round_robin = [c for row in itertools.zip_longest(*per_axis) for c in row if c is not None]
        variants: list[Variant] = []
        draw = 0
        while len(variants) < k:
            produced = False
            for axis_name, pi in round_robin:
                if len(variants) == k:
                    break
                rng = random.Random(f"{self.seed}:{digest}:{axis_name}:{sorted(pi.items())}:{draw}")
                names = self._name_map(payload, detections, axis_name, pi, rng)
                mapping = CounterfactualMapping(
                    axis=axis_name,
                    groups=_ordered_pairs(self.terms.axis(axis_name), pi),
                    names=names,
                )
                applied = self._rewrite(payload, mapping, detections)
                if not applied.substitutions:
                    continue
                produced = True
                variants.append(
                    Variant(applied.payload, applied.mapping, applied.substitutions, draw)
                )
            if not produced:
                break
            draw += 1
        if not variants:
            return CounterfactualSet(
                status="not_applicable",
                detections=detections,
                variants=(),
                reason="protected terms were found but no swap changes the payload",
            )
        return CounterfactualSet("applicable", detections, tuple(variants))

    def to_group(self, payload: Any, axis: str, group: str) -> Variant:
        """Set every mention of an axis to one group (LangFair's ``male_prompt`` style).

        Unlike :meth:`generate`, which permutes groups, this sends every mentioned group of
        ``axis`` to ``group``; a text mentioning both genders becomes all-female. The result
        can be mapped back only if at most one group was moved.

        Args:
            payload: The payload.
            axis: Axis name.
            group: Target group of that axis.

        Returns:
            The variant (its payload equals the input when nothing was moved).

        Raises:
            KeyError: Unknown axis or group.
        """
        ax = self.terms.axis(axis)
        if group not in ax.groups:
            raise KeyError(
                f"group {group!r} is not a group of axis {axis!r}: {', '.join(ax.groups)}"
            )
        detections = self.detect(payload)
        present = _present_groups(detections).get(axis, set())
        pi = {g: group for g in ax.groups if g in present and g != group}
        rng = random.Random(f"{self.seed}:{payload_digest(payload)}:{axis}:to:{group}")
        names = self._name_map(payload, detections, axis, pi, rng)
        mapping = CounterfactualMapping(
            axis=axis,
            groups=_ordered_pairs(ax, pi),
            names=names,
            invertible=group not in present,
        )
        return self.apply(payload, mapping)

    def apply(self, payload: Any, mapping: CounterfactualMapping) -> Variant:
        """Rewrite a payload with a given mapping.

        Args:
            payload: The payload.
            mapping: What to swap (groups of one axis, names).

        Returns:
            The variant, whose ``mapping`` also records the term choices made (``prefer``),
            for :meth:`map_back`.
        """
        return self._rewrite(payload, mapping)

    def map_back(self, payload: Any, mapping: CounterfactualMapping) -> Any:
        """Map a counterfactual output back to the original groups before comparing.

        Applies the inverse of ``mapping``: the swapped groups and names return, and a word
        with several counterparts returns to the one the input had.

        Args:
            payload: An output of the step run on the variant (``str`` or JSON-like).
            mapping: The variant's mapping.

        Returns:
            The payload in the original groups' terms.

        Raises:
            ValueError: The mapping is not one-to-one (see
                :meth:`CounterfactualMapping.inverse`).
        """
        inverse = mapping.inverse()
        back = CounterfactualMapping(
            axis=inverse.axis,
            groups=inverse.groups,
            names=inverse.names,
            prefer=mapping.prefer,
        )
        return self._rewrite(payload, back).payload

    def neutralise(
        self, payload: Any, *, axes: Sequence[str] | None = None, names: bool = True
    ) -> Any:
        """Replace protected mentions by group-neutral words (LangFair's ``neutralize_tokens``).

        Gender terms become their neutral form (``he`` → ``they``, ``his`` → ``their``,
        ``her`` → ``their``/``them`` by grammar, ``wife`` → ``spouse``); terms of other axes,
        and names when ``names`` is true, become ``[MASK]``; ages keep their number.

        Args:
            payload: The payload.
            axes: Axes to neutralise (default: all of this generator's).
            names: Whether names are masked too.

        Returns:
            The neutralised payload.
        """
        chosen = frozenset(axes) if axes is not None else frozenset(a.name for a in self.axes)

        def rewrite(path: Path, text: str) -> str:
            del path
            out: list[str] = []
            pos = 0
            for hit in self._scan(text):
                if hit.kind == "age":
                    continue
                if hit.kind == "name":
                    info = self._name_info(hit.name)
                    if (
                        not names
                        or info is None
                        or not (
                            (info.gender and "gender" in chosen) or (info.race and "race" in chosen)
                        )
                    ):
                        continue
                    repl = _MASK
                else:
                    if hit.axis not in chosen:
                        continue
                    repl = self._neutral_form(text, hit)
                out.append(text[pos : hit.start])
                out.append(repl)
                pos = hit.end
            out.append(text[pos:])
            return "".join(out)

        return _rebuild(payload, rewrite)

    # ------------------------------------------------------------------ internals
    def _neutral_form(self, text: str, hit: _Hit) -> str:
        axis = self.terms.axis(hit.axis)
        rows = [axis.rows[e.row] for e in axis.index[_norm(hit.surface)]]
        rows = _by_context(rows, text, hit.start, hit.end)
        neutral = rows[0].neutral if rows else None
        return _match_case(hit.surface, neutral) if neutral else _MASK

    def _feasible(self, axis: Axis, pi: Mapping[str, str], detections: Sequence[Detection]) -> bool:
        """Whether every mention of a moved group has a counterpart in its target group."""
        book = self.terms.names
        for det in detections:
            if det.axis != axis.name or len(det.groups) != 1 or det.groups[0] not in pi:
                continue
            g = det.groups[0]
            if det.kind == "name":
                key = self._compiled.name_key.get(_norm(det.surface))
                info = self._name_info(key) if key else None
                if book is None or info is None:
                    continue
                if axis.name == "gender":
                    ok = bool(book.first_pool(pi[g], info.race) or book.first_pool(pi[g], None))
                elif key in book.full and info.gender is not None:
                    ok = bool(book.full_pool(info.gender, pi[g]))
                else:
                    ok = info.gender is not None and bool(book.first_pool(info.gender, pi[g]))
                if not ok:
                    return False
                continue
            if det.kind != "term":
                continue
            entries = axis.index[_norm(det.surface)]
            if not any(axis.rows[e.row].form(pi[g]) is not None for e in entries if e.group == g):
                return False
        return True

    def _name_map(
        self,
        payload: Any,
        detections: Sequence[Detection],
        axis: str,
        pi: Mapping[str, str],
        rng: random.Random,
    ) -> tuple[tuple[str, str], ...]:
        book = self.terms.names
        if book is None or axis not in ("gender", "race") or not pi:
            return ()
        taken = {w for _, text in _leaves(payload) for w in re.findall(r"\w+", text.lower())}
        seen: dict[str, None] = {}
        for det in detections:
            if det.kind == "name" and det.axis == axis and det.groups[0] in pi:
                key = self._compiled.name_key.get(_norm(det.surface))
                if key is not None:
                    seen.setdefault(key, None)
        pairs: list[tuple[str, str]] = []
        used: set[str] = set()
        for name in seen:
            info = book.full.get(name) or book.first.get(name)
            if info is None:
                continue
            is_full = name in book.full
            first, _, last = name.partition(" ")
            if axis == "gender":
                assert info.gender is not None
                pool = book.first_pool(pi[info.gender], info.race) or book.first_pool(
                    pi[info.gender], None
                )
                new_first = _pick(pool, taken | used, rng)
                if new_first is None:
                    continue
                used.add(new_first.lower())
                if is_full:
                    pairs.append((name, f"{new_first} {last}"))
                pairs.append((first, new_first))
            else:
                assert info.race is not None
                if is_full:
                    assert info.gender is not None
                    pool = book.full_pool(info.gender, pi[info.race])
                    new = _pick(pool, taken | used, rng)
                    if new is None:
                        continue
                    new_first, _, new_last = new.partition(" ")
                    used.update((new.lower(), new_first.lower(), new_last.lower()))
                    pairs.append((name, new))
                    pairs.append((first, new_first))
                    if book.last.get(last) == info.race:
                        pairs.append((last, new_last))
                elif info.gender is not None:
                    pool = book.first_pool(info.gender, pi[info.race])
                    new_first = _pick(pool, taken | used, rng)
                    if new_first is None:
                        continue
                    used.add(new_first.lower())
                    pairs.append((first, new_first))
        unique: dict[str, str] = {}
        for src, dst in pairs:
            unique.setdefault(src, dst)
        return tuple(unique.items())

    def _scan(self, text: str) -> list[_Hit]:
        """Find term, age and name hits, longest first, without overlaps."""
        hits: list[_Hit] = []
        comp = self._compiled
        if comp.terms is not None:
            for m in comp.terms.finditer(text):
                hit = self._term_hit(text, m)
                if hit is not None:
                    hits.append(hit)
        age_axis = next((a for a in self.axes if a.numeric_age is not None), None)
        if age_axis is not None and age_axis.numeric_age is not None:
            rule = age_axis.numeric_age
            for m in _AGE_RE.finditer(text):
                n = int(m.group(1))
                if n <= rule.young_max:
                    group = age_axis.groups[0]
                elif n >= rule.old_min:
                    group = age_axis.groups[1]
                else:
                    continue
                hits.append(_Hit(m.start(), m.end(), m.group(0), "age", age_axis.name, (group,)))
        if comp.names is not None:
            for m in comp.names.finditer(text):
                surface = m.group(0)
                if not _capitalised(surface):
                    continue
                key = comp.name_key.get(_norm(surface))
                if key is not None:
                    hits.append(_Hit(m.start(), m.end(), surface, "name", "", (), key))
        return _non_overlapping(hits)

    def _term_hit(self, text: str, m: re.Match[str]) -> _Hit | None:
        surface = m.group(0)
        key = _norm(surface)
        axis = self._compiled.axis_of.get(key)
        if axis is None:
            return None
        entries = axis.index[key]
        rows = [axis.rows[e.row] for e in entries]
        if all(r.case_sensitive for r in rows) and not surface[:1].isupper():
            return None
        groups = tuple(dict.fromkeys(e.group for e in entries))
        if axis.name == "nationality":
            prev = _word_before(text, m.start())
            if prev is not None and prev.lower() in _LANGUAGE_VERBS:
                return None
        if key in axis.needs_person_word and not self._licensed(
            text, m.start(), m.end(), key, axis
        ):
            return None
        return _Hit(m.start(), m.end(), surface, "term", axis.name, groups)

    def _licensed(self, text: str, start: int, end: int, key: str, axis: Axis) -> bool:
        """Whether a context-dependent term at ``text[start:end]`` refers to people.

        Yes when the next word is a person word or "one(s)" ("a black doctor", "the straight
        one"), or when it is coordinated with a word that is ("a gay and a straight couple").
        A predicative form (``straight``, ``deaf`` …) also counts after a copula at the end of
        a phrase ("she is deaf."), and when its sentence has an unambiguous term of the same
        axis ("one pansexual and one straight").
        """
        nxt = _word_after(text, end)
        if nxt is not None:
            nxt = _POSSESSIVE.sub("", nxt)
        people = self.terms.person_words
        if nxt is not None and (nxt.lower() in people or nxt.lower() in _ONE):
            return True
        m = _COORDINATED.match(text, end)
        if m is not None and (m.group(1).lower() in people or m.group(1).lower() in _ONE):
            return True
        if key in axis.predicative:
            if self._anchored(text, start, end, axis):
                return True
            prev = _word_before(text, start)
            copula = prev is not None and (
                prev.lower() in _COPULAS or prev.lower().endswith(("'s", "’s", "'re", "’re"))
            )
            return copula and (nxt is None or nxt.lower() in _FUNCTION_WORDS)
        return False

    def _anchored(self, text: str, start: int, end: int, axis: Axis) -> bool:
        """Whether the sentence around ``text[start:end]`` has a context-free term of ``axis``."""
        left = max(text.rfind(c, 0, start) for c in ".!?\n")
        rights = [i for i in (text.find(c, end) for c in ".!?\n") if i != -1]
        right = min(rights) if rights else len(text)
        pattern = self._compiled.terms
        if pattern is None:
            return False
        for m in pattern.finditer(text, left + 1, right):
            key = _norm(m.group(0))
            if (
                m.start() != start
                and self._compiled.axis_of.get(key) is axis
                and key not in axis.needs_person_word
            ):
                return True
        return False

    def _rewrite(
        self,
        payload: Any,
        mapping: CounterfactualMapping,
        detections: Sequence[Detection] | None = None,
    ) -> Variant:
        axis = self.terms.axis(mapping.axis)
        pi = dict(mapping.groups)
        prefer = dict(mapping.prefer)
        name_map = {_norm(src): dst for src, dst in mapping.names}
        name_re = _literal_regex([src for src, _ in mapping.names])
        found = self.detect(payload) if detections is None else detections
        present = _present_groups(found).get(axis.name, set())
        subs: list[Substitution] = []
        chosen: dict[str, str] = {}

        def rewrite(path: Path, text: str) -> str:
            hits = [h for h in self._scan(text) if h.kind != "name"]
            if name_re is not None:
                for m in name_re.finditer(text):
                    if _capitalised(m.group(0)):
                        hits.append(
                            _Hit(m.start(), m.end(), m.group(0), "name", axis.name, (), m.group(0))
                        )
            out: list[str] = []
            pos = 0
            for hit in _non_overlapping(hits):
                repl = self._replacement(text, hit, axis, pi, prefer, present, name_map)
                if repl is None or repl == hit.surface:
                    continue
                segment = text[pos : hit.start]
                out.append(_fix_article(segment, hit.surface, repl))
                out.append(repl)
                pos = hit.end
                subs.append(Substitution(path, hit.start, hit.end, hit.surface, repl))
                if hit.kind == "term":
                    prev = chosen.get(repl)
                    chosen[repl] = hit.surface if prev in (None, hit.surface) else ""
            out.append(text[pos:])
            return "".join(out)

        new_payload = _rebuild(payload, rewrite)
        record = tuple((k, v) for k, v in chosen.items() if v)
        return Variant(
            payload=new_payload,
            mapping=CounterfactualMapping(
                axis=mapping.axis,
                groups=mapping.groups,
                names=mapping.names,
                prefer=record,
                invertible=mapping.invertible,
            ),
            substitutions=tuple(subs),
        )

    def _replacement(
        self,
        text: str,
        hit: _Hit,
        axis: Axis,
        pi: Mapping[str, str],
        prefer: Mapping[str, str],
        present: set[str],
        name_map: Mapping[str, str],
    ) -> str | None:
        if hit.kind == "name":
            target = name_map.get(_norm(hit.surface))
            return _match_case(hit.surface, target) if target is not None else None
        if hit.axis != axis.name:
            return None
        if hit.kind == "age":
            rule = axis.numeric_age
            if rule is None or hit.groups[0] not in pi:
                return None
            m = _AGE_RE.fullmatch(hit.surface)
            if m is None:
                return None
            return str(rule.mirror_sum - int(m.group(1))) + hit.surface[m.end(1) :]
        entries = axis.index[_norm(hit.surface)]
        moved = list(dict.fromkeys(e.group for e in entries if e.group in pi))
        if not moved:
            return None
        if len(moved) > 1:
            moved = [g for g in moved if g in present]
            if len(moved) != 1:
                return None
        g = moved[0]
        h = pi[g]
        rows = [axis.rows[e.row] for e in entries if e.group == g]
        rows = [r for r in rows if r.form(h) is not None]
        if not rows:
            return None
        wanted = prefer.get(hit.surface)
        if wanted and any(_norm(r.form(h) or "") == _norm(wanted) for r in rows):
            return wanted
        rows = _by_context(rows, text, hit.start, hit.end)
        target = rows[0].form(h)
        assert target is not None
        return _match_case(hit.surface, target, rows[0].form(g))


# ---------------------------------------------------------------------- helpers
def _norm(surface: str) -> str:
    return " ".join(surface.lower().split())


def _capitalised(surface: str) -> bool:
    return all(w[:1].isupper() for w in surface.split())


def _alternation(surfaces: Sequence[str]) -> str:
    """A regex matching any of ``surfaces`` (lower-cased, single-spaced), built as a trie.

    A trie-shaped pattern lets ``re`` reject a position after one character instead of trying
    thousands of alternatives; the greedy optional tails make the longest surface win.
    A space matches any run of whitespace.
    """
    trie: dict[str, Any] = {}
    for surface in surfaces:
        node = trie
        for ch in surface:
            node = node.setdefault(ch, {})
        node[""] = {}

    def build(node: dict[str, Any]) -> str:
        ends = "" in node
        alts = [
            (r"\s+" if ch == " " else re.escape(ch)) + build(child)
            for ch, child in sorted(node.items())
            if ch != ""
        ]
        if not alts:
            return ""
        body = alts[0] if len(alts) == 1 else "(?:" + "|".join(alts) + ")"
        if ends:
            return "(?:" + body + ")?" if len(alts) > 1 or len(body) > 1 else body + "?"
        return body

    return build(trie)


def _compile(axes: Sequence[Axis], book: NameBook | None) -> _Compiled:
    axis_of: dict[str, Axis] = {}
    for axis in axes:
        for s in axis.surfaces():
            axis_of[s] = axis
    terms = None
    if axis_of:
        terms = re.compile(
            r"(?<![\w-])(?:" + _alternation(list(axis_of)) + r")(?![\w-])", re.IGNORECASE
        )
    names = None
    name_key: dict[str, str] = {}
    axis_names = {a.name for a in axes}
    if book is not None and axis_names & {"gender", "race"}:
        for n in list(book.full) + list(book.first):
            name_key.setdefault(_norm(n), n)
        names = re.compile(
            r"(?<![\w'’-])(?:" + _alternation(list(name_key)) + r")(?![\w-])", re.IGNORECASE
        )
    return _Compiled(terms=terms, names=names, axis_of=axis_of, name_key=name_key)


def _literal_regex(literals: Sequence[str]) -> re.Pattern[str] | None:
    if not literals:
        return None
    return re.compile(
        r"(?<![\w'’-])(?:" + _alternation(sorted({_norm(x) for x in literals})) + r")(?![\w-])",
        re.IGNORECASE,
    )


def _non_overlapping(hits: Sequence[_Hit]) -> list[_Hit]:
    ordered = sorted(hits, key=lambda h: (h.start, -(h.end - h.start)))
    out: list[_Hit] = []
    end = -1
    for h in ordered:
        if h.start >= end:
            out.append(h)
            end = h.end
    return out


def _word_after(text: str, end: int) -> str | None:
    m = _WORD_AFTER.match(text, end)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


def _word_before(text: str, start: int) -> str | None:
    window = text[max(0, start - 80) : start]
    m = _WORD_BEFORE.search(window)
    if m is None or m.group(1) is None:
        return None
    return m.group(1)


def _context_pos(text: str, start: int, end: int) -> Literal["prenominal", "standalone"]:
    """Whether the word at ``text[start:end]`` stands before a noun phrase.

    Prenominal when the next token is a word that is not a function word, unless the previous
    word is a verb that takes "her" as its object (give, tell, let, make …).
    """
    nxt = _word_after(text, end)
    if nxt is None or nxt.lower() in _FUNCTION_WORDS:
        return "standalone"
    prev = _word_before(text, start)
    if prev is not None and prev.lower() in _OBJECT_VERBS:
        return "standalone"
    return "prenominal"


def _by_context(rows: Sequence[TermRow], text: str, start: int, end: int) -> list[TermRow]:
    if not any(r.pos != "any" for r in rows):
        return list(rows)
    ctx = _context_pos(text, start, end)
    fitting = [r for r in rows if r.pos in (ctx, "any")]
    return fitting or list(rows)


def _match_case(source: str, target: str, stored: str | None = None) -> str:
    """Give ``target`` the capitalisation the text gave ``source``.

    ``stored`` is how the term list writes ``source``. Written as stored → ``target`` as
    stored (``Asian`` → ``white``, ``Black`` → ``Hispanic``); all capitals (two or more
    letters) → all capitals; capitalised where the list has lower case (sentence start) →
    capitalised (every word when every source word is); lower case where the list has a
    capital → lower-case first letter.
    """
    letters = [c for c in source if c.isalpha()]
    if len(letters) >= 2 and all(c.isupper() for c in letters):
        return target.upper()
    if stored is not None and _same_initials(source, stored):
        return target
    if source[:1].isupper():
        words = source.split()
        if len(words) > 1 and all(w[:1].isupper() for w in words):
            return " ".join(w[:1].upper() + w[1:] for w in target.split())
        return target[:1].upper() + target[1:]
    if stored is not None:
        return target[:1].lower() + target[1:]
    return target


def _same_initials(a: str, b: str) -> bool:
    wa, wb = a.split(), b.split()
    return len(wa) == len(wb) and all(x[:1] == y[:1] for x, y in zip(wa, wb, strict=True))


def _vowel_sound(word: str) -> bool:
    w = word.lower()
    if w[:1].isdigit():
        digits = re.match(r"\d+", w)
        d = digits.group(0) if digits else ""
        return d.startswith("8") or (d[:2] in ("11", "18") and len(d) in (2, 5))
    if w.startswith(("eu", "uni", "use", "usu", "uti", "one", "once", "ubiq", "ewe")):
        return False
    if w.startswith(("hour", "honest", "honor", "honour", "heir")):
        return True
    return w[:1] in ("a", "e", "i", "o", "u")


def _fix_article(segment: str, old: str, new: str) -> str:
    """Correct "a"/"an" at the end of ``segment`` when the word after it changed."""
    m = _ARTICLE_BEFORE.search(segment)
    if m is None or _vowel_sound(old) == _vowel_sound(new):
        return segment
    article = m.group(1)
    wanted = "an" if _vowel_sound(new) else "a"
    if article.isupper() and len(article) > 1:
        wanted = wanted.upper()
    elif article[:1].isupper():
        wanted = wanted.capitalize()
    return segment[: m.start(1)] + wanted + segment[m.end(1) :]


def _present_groups(detections: Sequence[Detection]) -> dict[str, set[str]]:
    present: dict[str, set[str]] = {}
    for d in detections:
        if len(d.groups) == 1:
            present.setdefault(d.axis, set()).add(d.groups[0])
    return present


def _complete(sigma: Mapping[str, str]) -> dict[str, str]:
    """Extend an injective map to a permutation; drop fixed points."""
    pi = dict(sigma)
    image_only = [t for t in sigma.values() if t not in sigma]
    domain_only = [g for g in sigma if g not in sigma.values()]
    for a, b in zip(image_only, domain_only, strict=False):
        pi[a] = b
    return {a: b for a, b in pi.items() if a != b}


def _candidate_permutations(
    groups: Sequence[str], present: set[str], rng: random.Random
) -> list[dict[str, str]]:
    """Every permutation moving some mentioned group, shuffled; sampled when too many."""
    sources = [g for g in groups if g in present]
    total = 1
    for i in range(len(sources)):
        total *= len(groups) - i
    seen: set[tuple[tuple[str, str], ...]] = set()
    out: list[dict[str, str]] = []

    def add(targets: Sequence[str]) -> None:
        pi = _complete(dict(zip(sources, targets, strict=True)))
        key = tuple(sorted(pi.items()))
        if pi and key not in seen:
            seen.add(key)
            out.append(pi)

    if total <= _MAX_ENUMERATED:
        for targets in itertools.permutations(groups, len(sources)):
            add(targets)
        rng.shuffle(out)
    else:
        for _ in range(_MAX_ENUMERATED):
            add(rng.sample(list(groups), len(sources)))
    return out


def _ordered_pairs(axis: Axis, pi: Mapping[str, str]) -> tuple[tuple[str, str], ...]:
    return tuple((g, pi[g]) for g in axis.groups if g in pi)


def _pick(pool: Sequence[str], taken: set[str], rng: random.Random) -> str | None:
    """Draw a name none of whose words (first, last, or the whole) is already taken.

    Every part must be free, not only the first name: two people given one surname (or a
    surname already in the text) would make the variant impossible to map back.
    """
    if not pool:
        return None

    def free(name: str) -> bool:
        low = name.lower()
        return low not in taken and all(part not in taken for part in low.split())

    for _ in range(8):  # the pools are large and the taken set small: a few draws suffice
        name = rng.choice(pool)
        if free(name):
            return name
    candidates = [n for n in pool if free(n)]
    return rng.choice(candidates) if candidates else None


def _leaves(payload: Any, path: Path = ()) -> Iterator[tuple[Path, str]]:
    if isinstance(payload, str):
        yield path, payload
    elif isinstance(payload, dict):
        for key, value in payload.items():
            yield from _leaves(value, (*path, key))
    elif isinstance(payload, (list, tuple)):
        for i, value in enumerate(payload):
            yield from _leaves(value, (*path, i))


def _rebuild(payload: Any, fn: Callable[[Path, str], str], path: Path = ()) -> Any:
    if isinstance(payload, str):
        return fn(path, payload)
    if isinstance(payload, dict):
        return {key: _rebuild(value, fn, (*path, key)) for key, value in payload.items()}
    if isinstance(payload, list):
        return [_rebuild(value, fn, (*path, i)) for i, value in enumerate(payload)]
    if isinstance(payload, tuple):
        return tuple(_rebuild(value, fn, (*path, i)) for i, value in enumerate(payload))
    return payload


def _canon(payload: Any) -> Any:
    if isinstance(payload, (str, int, float, bool)) or payload is None:
        return payload
    if isinstance(payload, dict):
        return {str(k): _canon(v) for k, v in payload.items()}
    if isinstance(payload, (list, tuple)):
        return [_canon(v) for v in payload]
    return f"<{type(payload).__name__}>"


def payload_digest(payload: Any) -> str:
    """A stable 128-bit hex digest of a JSON-like payload (other objects count by type name)."""
    blob = json.dumps(_canon(payload), sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(blob.encode("utf-8")).hexdigest()[:32]
