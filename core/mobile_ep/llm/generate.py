"""Verification by generation: greedy decoding through the written prefill and decode graphs, token by token
against the original export on onnxruntime's CPU EP.

The graphs' KV cache (what an app does, and the generated Kotlin and Swift loops do the same):

* prefill: the prompt (``L`` <= ``prefill`` tokens, padded at the end) at positions ``0..L-1``; the past is
  ``context - prefill`` zeros, masked out; the mask is 1 over the prompt's slots ``context - prefill ..
  context - prefill + L - 1``.  The next token is the argmax of the logits at row ``L - 1``; the presents
  (``[1, kv_heads, prefill, head_dim]``: the new tokens' keys and values only) give the cache's slots ``0..L-1``.
* decode: the cache holds ``context - 1`` slots, ``n`` of them filled from the start; the token goes in at
  position ``n`` with the mask 1 over slots ``0..n-1`` and over the last slot (the new token's own); the
  present (one slot) is written into the cache's slot ``n``.  Up to ``context - 1`` tokens in all.

Attention does not depend on the order of the cache's slots (keys carry their rotary position), only on the
mask, so the cache never moves: each step writes one slot per layer.
"""

from __future__ import annotations

import dataclasses
import functools
import gc
import pathlib
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from mobile_ep import sessions
from mobile_ep.errors import UsageError
from mobile_ep.llm.decoder import Interface

__all__ = ["Generation", "greedy_graphs", "greedy_reference", "verify", "default_prompts"]


@dataclasses.dataclass
class Generation:
    """One prompt's greedy continuation through the graphs next to the reference's."""

    prompt: list[int]
    tokens: list[int]
    reference: list[int]
    #: Per step: the largest absolute difference of the logits (the graphs' against the reference's, each fed
    #: the reference's previous tokens, so one differing token does not make every later step differ).
    logits_error: list[float]
    #: The largest absolute logit of the reference over the steps (what the errors are relative to).
    logits_scale: float = 1.0

    @property
    def relative_error(self) -> float:
        return max(self.logits_error, default=0.0) / max(self.logits_scale, 1e-12)

    @property
    def agreement(self) -> float:
        return float(np.mean([a == b for a, b in zip(self.tokens, self.reference, strict=True)])) if self.tokens else 1.0

    def as_dict(self) -> dict:
        return {"prompt": self.prompt, "tokens": self.tokens, "reference": self.reference,
                "equal": self.tokens == self.reference, "token_agreement": round(self.agreement, 4),
                "max_logits_error": max(self.logits_error, default=0.0), "logits_scale": round(self.logits_scale, 6),
                "relative_logits_error": round(self.relative_error, 6), "logits_error": self.logits_error}


def default_prompts(vocab: int, prefill: int, seed: int = 0) -> list[list[int]]:
    """Two fixed prompts of token ids below *vocab*: half the prefill window and all of it."""
    rng = np.random.default_rng(seed)
    return [rng.integers(0, vocab, size=n).tolist() for n in sorted({max(1, prefill // 2), prefill})]


def _session(path, providers=None, provider_options=None):
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.log_severity_level = 3
    names = list(providers or ["CPUExecutionProvider"])
    chosen = [(n, dict(o)) for n, o in zip(names, provider_options, strict=True)] if provider_options else names
    return sessions.open_session(path, options, providers=chosen)


def _cache(face: Interface, length: int) -> dict[str, np.ndarray]:
    shape = (1, face.kv_heads, length, face.head_dim)
    return {name: np.zeros(shape, face.kv_dtype) for pair in face.past for name in pair}


def _chain(sessions, feed: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """*feed* through the *sessions* of a split graph in order, each taking what it names of the feed and of the
    earlier parts' outputs (the hidden states); every output by name."""
    values = dict(feed)
    for session in sessions:
        names = [o.name for o in session.get_outputs()]
        taken = feed if len(sessions) == 1 else {i.name: values[i.name] for i in session.get_inputs()}
        values.update(zip(names, session.run(None, taken), strict=True))
    return values


def _open_all(make: Callable[[pathlib.Path], Any], paths) -> list:
    """The sessions *make* opens of a graph: its path, or the paths of its parts in order."""
    paths = [paths] if isinstance(paths, (str, pathlib.Path)) else list(paths)
    return [make(pathlib.Path(p)) for p in paths]


class _Graphs:
    """The prefill and decode sessions (one per part of a split graph) with the cache of one generation.

    Each graph's sessions are given, or as a function that opens them: then only one graph's sessions are open at
    a time (the other's closed first), so that the weights both graphs read are held once.  With *remember*, each
    prompt's prefill is run once (its logits and cache kept for the next :meth:`start` of the same prompt)."""

    def __init__(self, face: Interface, context: int, prefill: int, prefill_sessions, decode_sessions,
                 remember: bool = False) -> None:
        self.face, self.context, self.prefill = face, context, prefill
        self.given = tuple(s if callable(s) else list(s) if isinstance(s, (list, tuple)) else [s]  # (a session, or one per part)
                           for s in (prefill_sessions, decode_sessions))
        self.opened: dict[int, list] = {}
        self.started: dict[tuple[int, ...], tuple] | None = {} if remember else None

    def _sessions(self, graph: int) -> list:
        given = self.given[graph]
        if not callable(given):
            return given
        if graph not in self.opened:
            self.opened.clear()  # (the other graph's sessions released before these open)
            gc.collect()
            self.opened[graph] = list(given())
        return self.opened[graph]

    def close(self) -> None:
        self.opened.clear()
        gc.collect()

    def start(self, prompt: Sequence[int]) -> np.ndarray:
        if self.started is not None and tuple(prompt) in self.started:
            logits, cache, self.filled = self.started[tuple(prompt)]
            self.cache = {name: array.copy() for name, array in cache.items()}
            return logits
        face, C, P, L = self.face, self.context, self.prefill, len(prompt)
        feed = {face.input_ids: np.array([list(prompt) + [0] * (P - L)], np.int64),
                face.attention_mask: np.zeros((1, C), np.int64), **_cache(face, C - P)}
        feed[face.attention_mask][0, C - P:C - P + L] = 1
        if face.position_ids:
            feed[face.position_ids] = np.arange(P, dtype=np.int64)[None]
        out = _chain(self._sessions(0), feed)
        self.cache = _cache(face, C - 1)
        for (past_k, past_v), (key, value) in zip(face.past, face.present, strict=True):
            self.cache[past_k][:, :, :L] = out[key][:, :, -P:][:, :, :L]  # (the last P slots: the new ones)
            self.cache[past_v][:, :, :L] = out[value][:, :, -P:][:, :, :L]
        self.filled = L
        logits = out[face.logits][0, L - 1].copy()
        if self.started is not None:
            self.started[tuple(prompt)] = (logits, {name: array.copy() for name, array in self.cache.items()}, L)
        return logits

    def step(self, token: int) -> np.ndarray:
        face, C, n = self.face, self.context, self.filled
        if n >= C - 1:
            raise UsageError(f"the context of {C} tokens is full")
        mask = np.zeros((1, C), np.int64)
        mask[0, :n] = 1
        mask[0, C - 1] = 1
        feed = {face.input_ids: np.array([[token]], np.int64), face.attention_mask: mask, **self.cache}
        if face.position_ids:
            feed[face.position_ids] = np.array([[n]], np.int64)
        out = _chain(self._sessions(1), feed)
        for (past_k, past_v), (key, value) in zip(face.past, face.present, strict=True):
            self.cache[past_k][:, :, n] = out[key][:, :, -1]
            self.cache[past_v][:, :, n] = out[value][:, :, -1]
        self.filled = n + 1
        return out[face.logits][0, -1]


class _Reference:
    """The original export (dynamic shapes), its cache growing by concatenation."""

    def __init__(self, face: Interface, session) -> None:
        self.face, self.session = face, session

    def _run(self, ids: Sequence[int]) -> np.ndarray:
        face, total = self.face, self.filled + len(ids)
        feed = {face.input_ids: np.array([list(ids)], np.int64), face.attention_mask: np.ones((1, total), np.int64),
                **self.cache}
        if face.position_ids:
            feed[face.position_ids] = np.arange(self.filled, total, dtype=np.int64)[None]
        out = dict(zip([o.name for o in self.session.get_outputs()], self.session.run(None, feed), strict=True))
        for (past_k, past_v), (key, value) in zip(face.past, face.present, strict=True):
            self.cache[past_k], self.cache[past_v] = out[key], out[value]
        self.filled = total
        return out[face.logits][0, -1]

    def start(self, prompt: Sequence[int]) -> np.ndarray:
        self.cache, self.filled = _cache(self.face, 0), 0
        return self._run(prompt)

    def step(self, token: int) -> np.ndarray:
        return self._run([token])


def _greedy(runner, prompt: Sequence[int], steps: int, forced: Sequence[int] | None = None
            ) -> tuple[list[int], list[np.ndarray]]:
    """*steps* greedy tokens after *prompt*; with *forced*, those tokens are fed instead of the argmax (teacher
    forcing, for comparing each step's logits)."""
    logits = [runner.start(prompt)]
    tokens = [int(np.argmax(logits[-1]))]
    while len(tokens) < steps:
        logits.append(runner.step(forced[len(tokens) - 1] if forced is not None else tokens[-1]))
        tokens.append(int(np.argmax(logits[-1])))
    return tokens, logits


def greedy_graphs(face: Interface, context: int, prefill: int, prefill_path, decode_path, prompt: Sequence[int],
                  steps: int, providers=None, provider_options=None) -> list[int]:
    """*steps* greedy tokens after *prompt* through the written graphs (a path each, or a list of the parts'
    paths in order)."""
    make = functools.partial(_session, providers=providers, provider_options=provider_options)
    runner = _Graphs(face, context, prefill, _open_all(make, prefill_path), _open_all(make, decode_path))
    return _greedy(runner, prompt, steps)[0]


def greedy_reference(face: Interface, export: str | pathlib.Path, prompt: Sequence[int], steps: int) -> list[int]:
    """*steps* greedy tokens after *prompt* through the original export on the CPU EP."""
    return _greedy(_Reference(face, _session(export)), prompt, steps)[0]


def verify(face: Interface, context: int, prefill: int, export: str | pathlib.Path, prefill_path, decode_path,
           prompts: Sequence[Sequence[int]], steps: int = 32, providers=None, provider_options=None,
           make_session: Callable[[pathlib.Path], Any] | None = None) -> list[Generation]:
    """Each prompt decoded greedily for *steps* tokens through the graphs (on *providers*, default the CPU EP;
    or in the sessions *make_session* makes of each graph's path, e.g. a plugin EP's) and through the original
    export on the CPU EP; per step the logits' largest difference under the reference's tokens."""
    for prompt in prompts:
        if not 1 <= len(prompt) <= prefill:
            raise UsageError(f"a prompt of {len(prompt)} tokens does not fit the prefill window of {prefill}")
        if len(prompt) + steps > context:
            raise UsageError(f"a prompt of {len(prompt)} tokens and {steps} new ones exceed the context of {context}")
    reference = _Reference(face, _session(export))
    expected = [_greedy(reference, prompt, steps) for prompt in prompts]
    del reference  # (its session released before the graphs' open: the weights are held once at a time)
    gc.collect()
    make = make_session or functools.partial(_session, providers=providers, provider_options=provider_options)
    graphs = _Graphs(face, context, prefill, *[functools.partial(_open_all, make, paths)
                                               for paths in (prefill_path, decode_path)],
                     remember=True)
    for prompt in prompts:  # (every prefill first: then the decode sessions open once)
        graphs.start(prompt)
    results = []
    for prompt, (reference_tokens, reference_logits) in zip(prompts, expected, strict=True):
        tokens, logits = _greedy(graphs, prompt, steps)
        if tokens != reference_tokens:  # (else teacher forcing feeds the same tokens: the same logits)
            logits = _greedy(graphs, prompt, steps, forced=reference_tokens)[1]
        errors = [float(np.max(np.abs(a.astype(np.float64) - b))) for a, b in zip(logits, reference_logits,
                                                                                   strict=True)]
        scale = max(float(np.max(np.abs(b))) for b in reference_logits)
        results.append(Generation(list(prompt), tokens, reference_tokens, [round(e, 6) for e in errors], scale))
    graphs.close()
    return results
