"""refused(): a call must raise AttnjitError with a given status and a message naming the argument."""
import pytest

from attnjit.errors import AttnjitError


def refused(status, needle, call, *args, **kwargs):
    """Calls call(*args, **kwargs), expects AttnjitError of `status` whose message contains `needle`; returns it."""
    with pytest.raises(AttnjitError) as info:
        call(*args, **kwargs)
    assert info.value.status == status, info.value.message
    assert needle in info.value.message, info.value.message
    return info.value
