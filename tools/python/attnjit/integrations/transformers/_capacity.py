"""How a decode plan follows the keys of generate()'s steps without planning again. Pure Python (no torch,
no library): tests run it on any machine.

A DynamicCache hands each step K/V one key longer. A decode plan is made for a capacity (kv_len rounded up,
capacity() below) with every request one page of that size, and the kernels read each request's length from
a device array the integration owns (last_page_len), clamping the planned chunks to it. So a step within the
capacity needs no plan: only a write of the new length to that array, once per step and plan (all layers of a
kind share it). LengthState decides, call by call, what must happen first.
"""

# The rounding: a multiple of the decode kernels' row tiles. Finer than a fraction of kv_len on purpose: the
# planner cuts a request into chunks rounded to tiles from the planned length, and a capacity 1/8 too long
# made a long request's chunks half as long again (1 x 4097 keys: 22 chunks of 192 rows, not 33 of 128); 64
# keys keeps the old chunks and costs a plan (host work, about 0.2 ms) every 64 steps.
GRANULE = 64


def capacity(kv_len):
    """The keys a plan is made for: kv_len rounded up to a multiple of GRANULE, so a plan serves the steps
    until kv_len passes it; the planned chunks past a request's kv_len are empty (the kernels skip them)."""
    if isinstance(kv_len, bool) or not isinstance(kv_len, int) or kv_len < 1:
        raise ValueError(f"kv_len={kv_len!r} is not allowed; allowed: an int >= 1")
    return -(-kv_len // GRANULE) * GRANULE


class Call:
    """What a call of kv_len keys does before its launch: plan for `plan_capacity` (None: the plan stands),
    write kv_len to the device lengths (`write_length`), and whether the launch may overlap the kernel before it
    (`pdl`, programmatic dependent launch)."""

    __slots__ = ("plan_capacity", "write_length", "pdl")

    def __init__(self, plan_capacity, write_length, pdl):
        self.plan_capacity, self.write_length, self.pdl = plan_capacity, write_length, pdl

    def __eq__(self, other):
        return isinstance(other, Call) and (self.plan_capacity, self.write_length, self.pdl) == \
            (other.plan_capacity, other.write_length, other.pdl)

    def __repr__(self):
        return f"Call(plan_capacity={self.plan_capacity}, write_length={self.write_length}, pdl={self.pdl})"


_KEPT = Call(None, False, True)  # the common case: a later layer of the step


class LengthState:
    """One plan's capacity and the length its device array holds (as last written, in stream order).

    PDL: a decode launched right after the length's write may start while that write still runs, and warm L2
    from rows it locates with the length it reads then (decode_prefetch.cuh: hints, possibly stale). The rows
    past a request's keys may lie past the tensor's memory (the page is the capacity, the tensor kv_len keys),
    so a launch whose stale length could exceed kv_len (right after a plan, which leaves the capacity there,
    or after a shorter length than the last) goes without PDL."""

    __slots__ = ("capacity", "on_device")

    def __init__(self):
        self.capacity = None  # no plan yet
        self.on_device = None

    def call(self, kv_len):
        """The Call for kv_len keys, and the state after it."""
        if kv_len == self.on_device:
            return _KEPT
        wanted = capacity(kv_len)
        planned = None
        if wanted != self.capacity:
            planned = self.capacity = wanted
            self.on_device = wanted  # the plan's table: every request one full page
        before = self.on_device
        if kv_len == before:
            return Call(planned, False, True)
        self.on_device = kv_len
        return Call(planned, True, before <= kv_len)

    def forget(self):
        """After a plan that raised: nothing is planned."""
        self.capacity = self.on_device = None


# What the decode kernels' loads need of K/V strides, in bytes (16-byte rows; the library checks it too).
ALIGN_BYTES = 16


def contiguous_strides(shape):
    """The strides, in elements, of a contiguous tensor of `shape`."""
    strides, step = [], 1
    for n in reversed(tuple(shape)):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def page_strides(shape, strides, element_size):
    """The strides of K or V [batch, kv_heads, kv_len, head_dim] (shape, strides in elements) as a page array
    [pages = batch, kv_heads, capacity, head_dim], or None where the kernels cannot read it in place (a
    contiguous copy then serves; a head_dim that is not contiguous is refused before). A size-1 dimension's
    stride is never followed; the key axis holds the capacity's rows in the page array, so with one key its
    stride gets a value the library's alignment check passes."""
    batch, heads, kv_len, dim = shape
    strides = list(strides)
    if kv_len == 1:
        strides[2] = dim
    sizes = (batch, heads, 2)  # the page array's sizes as the check sees them: the key axis always has rows
    if strides[3] != 1 or any(n > 1 and (s * element_size) % ALIGN_BYTES for n, s in zip(sizes, strides)):
        return None
    return tuple(strides)
