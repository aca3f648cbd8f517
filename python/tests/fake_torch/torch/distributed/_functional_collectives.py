from . import _issue, _log


class AsyncCollectiveTensor:
    pass


def all_reduce(self, reduceOp, group, tag=""):
    _issue("functional.all_reduce", group, True)
    return AsyncCollectiveTensor()


def wait_tensor(tensor):
    _log("functional.wait_tensor")
    return tensor
