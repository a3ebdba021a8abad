"""A continuous-batching trace for the engine harness (test_engine_harness.py): requests arrive, are
prefilled in chunks under a token budget (so later chunks extend a cached prefix), decode one token a step,
finish and give their pages back to a shared pool that hands pages out in random order. Some requests start
with a cached shared prefix (a prefix-cache hit: the same physical pages in every such request).

Pure Python (no torch), so the trace itself is tested on the CPU; the engine drivers turn each step into
the calls vLLM's and SGLang's FlashInfer backends make.
"""

import random
from collections import deque
from dataclasses import dataclass

# Own prompt lengths a request draws from: odd sizes, one-token prompts, page-boundary neighbours.
PROMPT_CHOICES = (1, 3, 7, 15, 16, 17, 33, 64, 97, 130, 161, 203)
OUTPUT_CHOICES = (2, 3, 5, 8, 11)


@dataclass(frozen=True)
class RequestSpec:
    rid: int
    arrival: int  # the step at which it enters the waiting queue
    prompt_len: int  # prompt tokens, the shared prefix included
    output_len: int  # decode steps after the prompt
    shares_prefix: bool  # starts with the shared prefix cached (its pages are the trace's shared_pages)


@dataclass(frozen=True)
class Scheduled:
    """One request in one step: `q_len` new tokens at positions cached .. cached + q_len - 1, their K/V
    written this step; `pages` cover all cached + q_len tokens."""

    rid: int
    cached: int
    q_len: int
    decoding: bool  # in its decode phase (one token), else a prompt chunk
    shares_prefix: bool
    pages: tuple

    @property
    def kv_len(self):
        return self.cached + self.q_len


@dataclass(frozen=True)
class Step:
    index: int
    batch: tuple  # Scheduled, in admission order
    arrived: tuple  # rids that entered the running set this step
    finished: tuple  # rids that finish after this step (their own pages go back to the pool)

    @property
    def decode_only(self):
        return all(s.decoding for s in self.batch)

    @property
    def mixed(self):
        return any(s.decoding for s in self.batch) and not self.decode_only

    @property
    def extends_prefix(self):
        """Some prompt chunk attends to tokens already cached (chunked prefill or a prefix hit)."""
        return any(not s.decoding and s.cached > 0 for s in self.batch)

    @property
    def all_share_prefix(self):
        return all(s.shares_prefix for s in self.batch)

    def describe(self):
        kind = "decode" if self.decode_only else "mixed" if self.mixed else "prefill"
        reqs = ", ".join(f"r{s.rid}:{s.cached}+{s.q_len}" for s in self.batch)
        return f"step {self.index} ({kind}: {reqs})"


class PagePool:
    """Page ids handed out one at a time from a random place in the free list, so a request's pages are
    scattered and a freed page comes back to some later request."""

    def __init__(self, num_pages, rng, reserved=(0,)):
        self.rng = rng
        self.free = [p for p in range(num_pages) if p not in reserved]
        self.taken_ever = set()
        self.reused = 0  # pages handed out again after being given back

    def take(self):
        if not self.free:
            raise ValueError("the page pool is exhausted: give the trace more pages")
        page = self.free.pop(self.rng.randrange(len(self.free)))
        if page in self.taken_ever:
            self.reused += 1
        self.taken_ever.add(page)
        return page

    def give(self, pages):
        self.free.extend(pages)


@dataclass
class Trace:
    page_size: int
    num_pages: int
    shared_prefix_len: int
    shared_pages: tuple
    requests: dict  # rid -> RequestSpec
    steps: list
    pages_reused: int

    @property
    def max_kv_len(self):
        return max(s.kv_len for step in self.steps for s in step.batch)

    @property
    def max_running(self):
        return max(len(step.batch) for step in self.steps)


def make_requests(seed, num_requests, shared_prefix_len, first_shared=3):
    """Request specs: the first `first_shared` share the prefix and arrive two a step (batches every request
    of which shares it); the others arrive up to three steps apart, some sharing it."""
    rng = random.Random(seed)
    specs, arrival = [], 0
    for rid in range(num_requests):
        shares = rid < first_shared or rng.random() < 0.3
        arrival = rid // 2 if rid < first_shared else arrival + rng.choice((0, 1, 1, 2, 3))
        own = rng.choice(PROMPT_CHOICES)
        specs.append(RequestSpec(rid, arrival, own + (shared_prefix_len if shares else 0),
                                 rng.choice(OUTPUT_CHOICES), shares))
    return specs


def make_trace(seed, page_size, num_pages, shared_prefix_len, num_requests=14, token_budget=64, max_running=6,
               reserved_pages=(0,)):
    """Schedules `make_requests` over a pool of `num_pages` pages (the reserved ones never handed out).

    Each step: arrivals join the waiting queue, which fills the running set up to max_running; every
    request in its decode phase gets one token, prompt chunks share what is left of token_budget in
    admission order. A request decodes output_len steps after its prompt, then finishes.
    """
    if shared_prefix_len % page_size:
        raise ValueError(f"shared_prefix_len={shared_prefix_len} must be a multiple of page_size={page_size}")
    rng = random.Random(seed + 1)
    pool = PagePool(num_pages, rng, reserved_pages)
    shared_pages = tuple(pool.take() for _ in range(shared_prefix_len // page_size))
    specs = make_requests(seed, num_requests, shared_prefix_len)
    pending = deque(sorted(specs, key=lambda s: (s.arrival, s.rid)))
    waiting, running = deque(), []
    state = {}  # rid -> [cached, pages, decodes_done]
    steps, t = [], 0
    while pending or waiting or running:
        while pending and pending[0].arrival <= t:
            waiting.append(pending.popleft())
        arrived = []
        while waiting and len(running) < max_running:
            spec = waiting.popleft()
            running.append(spec)
            cached = shared_prefix_len if spec.shares_prefix else 0
            state[spec.rid] = [cached, list(shared_pages) if spec.shares_prefix else [], 0]
            arrived.append(spec.rid)
        budget, plan = token_budget, []
        for spec in running:
            if state[spec.rid][0] >= spec.prompt_len:
                plan.append((spec, 1, True))
                budget -= 1
        for spec in running:
            cached = state[spec.rid][0]
            if cached < spec.prompt_len and budget > 0:
                q_len = min(spec.prompt_len - cached, budget)
                plan.append((spec, q_len, False))
                budget -= q_len
        if plan:
            order = {spec.rid: i for i, spec in enumerate(running)}
            plan.sort(key=lambda p: order[p[0].rid])
            batch, finished = [], []
            for spec, q_len, decoding in plan:
                st = state[spec.rid]
                while len(st[1]) * page_size < st[0] + q_len:
                    st[1].append(pool.take())
                batch.append(Scheduled(spec.rid, st[0], q_len, decoding, spec.shares_prefix, tuple(st[1])))
                st[0] += q_len
                if decoding:
                    st[2] += 1
                    if st[2] == spec.output_len:
                        finished.append(spec.rid)
            steps.append(Step(len(steps), tuple(batch), tuple(arrived), tuple(finished)))
            for rid in finished:
                running = [s for s in running if s.rid != rid]
                pool.give([p for p in state.pop(rid)[1] if p not in shared_pages])
        t += 1
    return Trace(page_size, num_pages, shared_prefix_len, shared_pages, {s.rid: s for s in specs}, steps,
                 pool.reused)


def replay(trace, step_fn, tolerated):
    """Calls step_fn(step) for every step; an exception of a `tolerated` kind (a refused argument, a wrong
    result) is recorded and the trace goes on, so one run names every step that fails. Returns the list of
    failures, one line each."""
    failures = []
    for step in trace.steps:
        try:
            step_fn(step)
        except Exception as error:  # noqa: BLE001 - tolerated() decides; the rest propagates
            if not tolerated(error):
                raise
            failures.append(f"{step.describe()}: {type(error).__name__}: {error}")
    return failures
