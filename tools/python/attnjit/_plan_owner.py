"""PlanOwner: what every wrapper holding a C plan shares.

A wrapper owns its C plan handle (a ``Plan``, destroyed with the wrapper),
references to its workspaces (the library keeps raw pointers into them, so
they live as long as the handle), its device, and whether plan() has run.
As in FlashInfer, ``float_workspace_buffer`` is scratch that any number of
wrappers may share on one stream, and each wrapper allocates an int
workspace of its own (8 MiB, FlashInfer's size) for its plan's metadata;
where the library takes one (attnjit_plan_set_int_workspace), the plan
keeps its index arrays there.
"""

import contextlib
import ctypes

from . import _args as checks
from ._library import check, has, lib
from ._streams import current_stream
from .errors import AttnjitError, Status, invalid_argument

INT_WORKSPACE_BYTES = 8 * 1024 * 1024


class PlanOwner:
    _plan = None  # the C plan (a Plan or another handle owner with .handle and .destroy())
    _planned = False

    def _own_workspaces(self, torch, float_workspace_buffer, int_workspace_buffer=None):
        """Checks and keeps both workspaces; allocates the int workspace when none is given."""
        checks.workspace(torch, "float_workspace_buffer", float_workspace_buffer)
        device = float_workspace_buffer.device
        self._own_int_workspace = int_workspace_buffer is None  # may then grow (see _plan_with_room)
        if int_workspace_buffer is None:
            int_workspace_buffer = torch.empty(INT_WORKSPACE_BYTES, dtype=torch.uint8, device=device)
        checks.workspace(torch, "int_workspace_buffer", int_workspace_buffer)
        if int_workspace_buffer.device != device:
            raise invalid_argument(f"int_workspace_buffer: device {int_workspace_buffer.device} is not allowed; "
                                   f"allowed: {device} (float_workspace_buffer's)")
        self._float_workspace_buffer = float_workspace_buffer
        self._int_workspace_buffer = int_workspace_buffer
        self._workspace_size = float_workspace_buffer.numel() * float_workspace_buffer.element_size()
        self.device = device

    def _adopt_int_workspace(self, handle):
        """Hands a generic plan handle this wrapper's int workspace for its metadata, where the library
        takes one (a library without attnjit_plan_set_int_workspace keeps it in its own memory)."""
        if not has("attnjit_plan_set_int_workspace"):
            return
        buffer = self._int_workspace_buffer
        check(lib().attnjit_plan_set_int_workspace(handle, ctypes.c_void_p(buffer.data_ptr()),
                                                   buffer.numel() * buffer.element_size()))

    def _plan_with_room(self, torch, plan_call):
        """plan_call() (a C plan() on this wrapper's handle); where the plan needs more int workspace than the
        8 MiB this wrapper allocated (a large custom mask), a buffer twice as large is taken and the plan made
        again. Not in CUDA-graph mode, where a captured graph holds the buffer's address, nor for a buffer the
        caller gave (reset_workspace_buffer): there the library's error, naming int_workspace_buffer, stands."""
        while True:
            try:
                return plan_call()
            except AttnjitError as error:
                if (error.status != Status.WORKSPACE_TOO_SMALL or "int_workspace_buffer" not in error.message
                        or not self._own_int_workspace or getattr(self, "_use_cuda_graph", False)):
                    raise
                size = self._int_workspace_buffer.numel() * self._int_workspace_buffer.element_size()
                self._int_workspace_buffer = torch.empty(2 * size, dtype=torch.uint8, device=self.device)
                self._adopt_int_workspace(self._plan.handle)

    def _replace_plan(self, plan):
        """Makes `plan` this wrapper's C plan, destroying the one before; nothing is planned on it yet."""
        if self._plan is not None:
            self._plan.destroy()
        self._plan = plan
        self._planned = False

    def _plan_again_if_options_changed(self, torch, device, options, plan_again):
        """forward() may change options the kernels take at plan time (`options` names them): plan again from
        the kept index arrays, which a CUDA graph being captured cannot record."""
        if self._settings() == self._planned_settings:
            return
        if self._capturing(torch, device):
            raise checks.unsupported(f"{options} other than plan()'s cannot change while a CUDA graph is captured "
                                     "(they are planned again); pass them to plan() instead")
        plan_again()

    def _logit_scale(self, q_scale, k_scale):
        """The run's factor on the planned softmax scale: q_scale, k_scale and a forward()'s sm_scale."""
        sm_scale = self._default_sm_scale() if self._sm_scale is None else checks.finite_float("sm_scale",
                                                                                             self._sm_scale)
        ratio = sm_scale / self._planned_sm_scale
        return checks.product(q_scale, k_scale, None if ratio == 1.0 else ratio)

    def _require_planned(self, how="plan(...)"):
        if not self._planned:
            raise AttnjitError(Status.NOT_PLANNED, f"run() before plan(): call {how} first")

    def _check_run_against_plan(self, torch, window_left, q):
        """A run()'s window_left (None or the planned one: the kernels take it at plan time) and q's dtype
        (plan()'s q_data_type)."""
        if window_left is not None and checks.window(window_left) != self._window_left:
            raise checks.unsupported(f"window_left={window_left} is not supported: it differs from plan()'s "
                                     f"window_left={self._window_left}, which the kernels take at plan time; "
                                     "allowed: None or the planned value")
        checks.tensor(torch, "q", q)
        if q.dtype != self._cached_q_data_type:
            raise invalid_argument(f"q: dtype {q.dtype} is not allowed; allowed: {self._cached_q_data_type} "
                                   "(plan()'s q_data_type)")

    @contextlib.contextmanager
    def _stream(self, torch, device=None):
        """torch's current stream on `device` (the wrapper's by default), inside that device's context."""
        with current_stream(torch, self.device if device is None else device) as stream:
            yield stream

    @staticmethod
    def _capturing(torch, device):
        with torch.cuda.device(device):
            return torch.cuda.is_current_stream_capturing()

    def check(self):
        """Waits for the wrapper's device, then raises AttnjitError INVALID_ARGUMENT naming a bad entry its
        kernels met in a page table on the device (a page id past the cache, say, written into a fixed CUDA-graph
        buffer before a replay). plan() and run() raise one at their start, without waiting."""
        if self._plan is not None and has("attnjit_plan_check"):
            check(lib().attnjit_plan_check(self._plan.handle))

    def _remake_plan(self):
        """A new C plan on the current workspaces (a subclass's; reset_workspace_buffer calls it)."""
        raise NotImplementedError

    def reset_workspace_buffer(self, float_workspace_buffer, int_workspace_buffer):
        """New workspaces (FlashInfer's): the plan is made again on them, so call plan() again before run()."""
        from ._dlpack import require_torch

        torch = require_torch()
        self._own_workspaces(torch, float_workspace_buffer, int_workspace_buffer)
        self._remake_plan()

    def __del__(self):
        try:
            if self._plan is not None:
                self._plan.destroy()
        except Exception:  # interpreter shutdown: the library may be gone
            pass
