"""The vendor's collective (`hccl`, `mccl`) for the stand-in device, carried by gloo.

Gloo accepts cpu tensors only; device tensors here live in host memory, so each collective hands gloo cpu
tensors over the same memory (`fake_device::host_view`, no copy) and the results land in the device
tensors themselves. Every collective completes before it returns, as the device's work is synchronous; a send or
receive runs on, as the vendors' do.
"""

from __future__ import annotations

import torch
import torch.distributed as dist


def _host(tensor):
    with torch.no_grad():
        return torch.ops.fake_device.host_view(tensor.detach())


def _hosts(tensors):
    return [_host(t) for t in tensors]


class _Done(dist._Work):
    """A finished collective: `wait` returns at once, the future holds the result tensors."""

    def __init__(self, result):
        super().__init__()
        self._result = result
        self._future = torch.futures.Future()
        self._future.set_result(result)

    def wait(self, timeout=None):
        return True

    def is_completed(self):
        return True

    def result(self):
        return self._result

    def get_future(self):
        return self._future


class HostCollective(dist.ProcessGroup):
    """A process group whose collectives run gloo over host views of the device tensors."""

    def __init__(self, name: str, store, rank: int, size: int, timeout):
        super().__init__(rank, size)
        self._name = name
        self._gloo = dist.ProcessGroupGloo(store, rank, size, timeout)

    def getBackendName(self):  # noqa: N802 - the name pybind's trampoline asks for
        return self._name

    def name(self):
        return self._name

    # torch names a group through `_set_group_name`, which a Python subclass does not keep: a device mesh
    # (FSDP2's fully_shard) reads the name back.
    def _set_group_name(self, name: str) -> None:
        self._group_name = name

    @property
    def group_name(self) -> str:
        return self._group_name

    def _run(self, work, result):
        work.wait()
        return _Done(result)

    def allreduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceOptions()
        return self._run(self._gloo.allreduce(_hosts(tensors), opts), tensors)

    def allreduce_coalesced(self, tensors, opts=None):
        opts = opts if opts is not None else dist.AllreduceCoalescedOptions()
        return self._run(self._gloo.allreduce_coalesced(_hosts(tensors), opts), tensors)

    def broadcast(self, tensors, opts=None):
        opts = opts if opts is not None else dist.BroadcastOptions()
        return self._run(self._gloo.broadcast(_hosts(tensors), opts), tensors)

    def reduce(self, tensors, opts=None):
        opts = opts if opts is not None else dist.ReduceOptions()
        return self._run(self._gloo.reduce(_hosts(tensors), opts), tensors)

    def allgather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        work = self._gloo.allgather([_hosts(outputs) for outputs in output_lists], _hosts(inputs), opts)
        return self._run(work, output_lists)

    def _allgather_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.AllgatherOptions()
        return self._run(self._gloo._allgather_base(_host(output), _host(input), opts), [output])

    def gather(self, output_lists, inputs, opts=None):
        opts = opts if opts is not None else dist.GatherOptions()
        work = self._gloo.gather([_hosts(outputs) for outputs in output_lists], _hosts(inputs), opts)
        return self._run(work, output_lists)

    def scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ScatterOptions()
        work = self._gloo.scatter(_hosts(outputs), [_hosts(inputs) for inputs in input_lists], opts)
        return self._run(work, outputs)

    def reduce_scatter(self, outputs, input_lists, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        work = self._gloo.reduce_scatter(_hosts(outputs), [_hosts(inputs) for inputs in input_lists], opts)
        return self._run(work, outputs)

    def _reduce_scatter_base(self, output, input, opts=None):
        opts = opts if opts is not None else dist.ReduceScatterOptions()
        return self._run(self._gloo._reduce_scatter_base(_host(output), _host(input), opts), [output])

    def alltoall_base(self, output, input, output_split_sizes, input_split_sizes, opts=None):
        opts = opts if opts is not None else dist.AllToAllOptions()
        work = self._gloo.alltoall_base(_host(output), _host(input), output_split_sizes, input_split_sizes, opts)
        return self._run(work, [output])

    # Point-to-point work is left running, as HCCL's and NCCL's is: a pipeline posts a stage's send and receive
    # together and waits for both, and a send that waited for its receiver before returning would never see the
    # receive the other side posts after its own send. The host views carry the data in place.
    def send(self, tensors, dst, tag):
        return self._gloo.send(_hosts(tensors), dst, tag)

    def recv(self, tensors, src, tag):
        return self._gloo.recv(_hosts(tensors), src, tag)

    def barrier(self, opts=None):
        return self._run(self._gloo.barrier(opts if opts is not None else dist.BarrierOptions()), [])

    def allgather_into_tensor_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._allgather_base(output, input, opts)
        return _Done(outputs)

    def reduce_scatter_tensor_coalesced(self, outputs, inputs, opts=None):
        for output, input in zip(outputs, inputs):
            self._reduce_scatter_base(output, input, opts)
        return _Done(outputs)

    # The names torch.distributed calls from torch 2.10 on (all_gather_into_tensor, …): the same work.
    all_gather_single = _allgather_base
    reduce_scatter_single = _reduce_scatter_base
    all_to_all_single = alltoall_base
    all_gather_single_coalesced = allgather_into_tensor_coalesced
    reduce_scatter_single_coalesced = reduce_scatter_tensor_coalesced


def register(name: str, device_type: str) -> None:
    """`dist.Backend.register_backend` as the vendor plugins call it."""
    dist.Backend.register_backend(
        name,
        lambda store, rank, size, timeout: HostCollective(name, store, rank, size, timeout),
        devices=[device_type],
    )
