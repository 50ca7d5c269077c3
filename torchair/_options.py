"""torchair's configuration model: sections of named options, each validated when set."""

__all__ = []


class OptionValue:
    """One option: a default and, optionally, the values it accepts."""

    def __init__(self, default, optional=None):
        self._default = default
        self._optional = optional
        self._value = default

    def __bool__(self):
        return bool(self._value)

    @property
    def default(self):
        return self._default

    @property
    def optional(self):
        return self._optional

    @property
    def value(self):
        """The value as torchair hands it to GE: None, "1"/"0" for booleans, else a string."""
        if self._value is None:
            return None
        if self._value is True:
            return "1"
        if self._value is False:
            return "0"
        return str(self._value)

    @value.setter
    def value(self, v):
        if isinstance(self._optional, (tuple, list)) and v not in self._optional:
            raise ValueError(f"'{v}' not in optional list {self._optional}")
        self._value = v


class IntRangeValue(OptionValue):
    def __init__(self, default, low, high):
        super().__init__(default)
        self._low, self._high = low, high

    @property
    def value(self):
        return OptionValue.value.fget(self)

    @value.setter
    def value(self, v):
        if not isinstance(v, int) or isinstance(v, bool):
            raise ValueError(f"Please set integer type, but got {type(v)}")
        if not self._low <= v <= self._high:
            raise ValueError(f"Please set value in [{self._low}, {self._high}], {v} is out of range.")
        self._value = v


class NpuBaseConfig:
    """A section: options and sub-sections fixed at construction; unknown names are refused."""

    def __init__(self):
        self._fixed_attrs = [k for k, v in self.__dict__.items() if isinstance(v, (OptionValue, NpuBaseConfig))]

    def __setattr__(self, key, value):
        if "_fixed_attrs" in self.__dict__:
            if key not in self._fixed_attrs:
                raise ValueError(f"{type(self).__name__} has no option {key}, all options {self._fixed_attrs}")
            current = getattr(self, key)
            if isinstance(current, OptionValue):
                current.value = value
                return
        super().__setattr__(key, value)

    def as_dict(self):
        """{"section.option": value} of every option set to something other than None."""
        out = {}
        for name in self._fixed_attrs:
            item = getattr(self, name)
            if isinstance(item, NpuBaseConfig):
                out.update({f"{name}.{k}": v for k, v in item.as_dict().items()})
            elif item.value is not None:
                out[name] = item.value
        return out
