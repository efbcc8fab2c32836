// Tensors shared with NumPy and PyTorch, never copied: a loom tensor made from an
// array borrows the array's memory (Storage::borrow, holding the array alive), an
// array made from a tensor holds the tensor's storage alive, and DLPack does the
// same with any library that speaks it (torch.utils.dlpack).
#include <dlpack/dlpack.h>
#include <pybind11/numpy.h>
#include <pybind11/stl.h>

#include "bindings.h"
#include "loom/kernel_table.h"

namespace loom::python {

namespace {

struct DTypeCode {
  DType dtype;
  DLDataType dlpack;
};
// bf16 crosses DLPack (kDLBfloat) but not NumPy, which has no bfloat16. bool is DLPack
// 0.8's kDLBool (code 6; the header here is 0.6): 8-bit unsigned is uint8, which loom
// does not have (PyTorch 1.13 exports uint8 that way and cannot export bool at all).
constexpr uint8_t kDLBoolCode = 6;
constexpr DTypeCode kCodes[] = {
    {DType::f32, {kDLFloat, 32, 1}}, {DType::f64, {kDLFloat, 64, 1}},  {DType::i32, {kDLInt, 32, 1}},
    {DType::i64, {kDLInt, 64, 1}},   {DType::b8, {kDLBoolCode, 8, 1}}, {DType::bf16, {kDLBfloat, 16, 1}},
};

DType dtype_of_numpy(const py::dtype& dtype) {
  const char kind = dtype.kind();
  const auto size = dtype.itemsize();
  if (kind == 'f' && size == 4) return DType::f32;
  if (kind == 'f' && size == 8) return DType::f64;
  if (kind == 'i' && size == 4) return DType::i32;
  if (kind == 'i' && size == 8) return DType::i64;
  if (kind == 'b') return DType::b8;
  throw py::type_error("from_numpy: loom has no dtype for NumPy's " +
                       py::str(static_cast<const py::object&>(dtype)).cast<std::string>() +
                       " (float32, float64, int32, int64 and bool are shared)");
}

py::dtype numpy_dtype_of(DType dtype) {
  switch (dtype) {
    case DType::f32: return py::dtype::of<float>();
    case DType::f64: return py::dtype::of<double>();
    case DType::i32: return py::dtype::of<int32_t>();
    case DType::i64: return py::dtype::of<int64_t>();
    case DType::b8: return py::dtype::of<bool>();
    case DType::bf16: break;
  }
  fail("numpy: NumPy has no bfloat16; convert first with .float()");
}

// The element address of a tensor's first element, on any device (DLPack hands
// out device pointers; nothing here reads them).
void* first_element(const Tensor& t) {
  KernelScope scope;
  return t.raw_data();
}

// A tensor over memory someone else owns, strides in elements; `release` runs when the
// last view goes (what it captures, e.g. the NumPy array, lives until then).
Tensor borrowed_tensor(void* data, DType dtype, Device device, Shape shape, Shape strides,
                       std::function<void()> release) {
  int64_t extent = 1;  // elements from the first to one past the last
  for (size_t d = 0; d < shape.size(); ++d) {
    if (shape[d] == 0) extent = 0;
    if (extent > 0) extent += (shape[d] - 1) * strides[d];
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = Storage::borrow(data, static_cast<size_t>(extent) * dtype_size(dtype), device, std::move(release));
  impl->sizes = std::move(shape);
  impl->strides = std::move(strides);
  impl->dtype = dtype;
  return Tensor(impl);
}

Tensor from_numpy(py::array array) {
  const DType dtype = dtype_of_numpy(array.dtype());
  if (!array.writeable()) {  // loom has no read-only tensors: a copy keeps the array's memory as it is
    PyErr_WarnEx(PyExc_UserWarning,
                 "from_numpy: the array is read-only, so the tensor holds a copy of it (writes to one do not show in "
                 "the other)",
                 1);
    array = py::module_::import("numpy").attr("array")(array, py::arg("copy") = true);
  }
  const auto item = array.itemsize();
  Shape shape(array.shape(), array.shape() + array.ndim()), strides;
  for (py::ssize_t d = 0; d < array.ndim(); ++d) {
    const auto bytes = array.strides(d);
    if (bytes < 0 || bytes % item != 0)
      throw py::value_error(
          "from_numpy: strides " +
          std::string(py::str(py::cast(std::vector<py::ssize_t>(array.strides(), array.strides() + array.ndim())))) +
          " are negative or not whole elements; pass a copy (numpy.ascontiguousarray)");
    strides.push_back(bytes / item);
  }
  return borrowed_tensor(const_cast<void*>(array.data()), dtype, kCPU, std::move(shape), std::move(strides),
                         [owner = hold(array)] {});
}

py::array to_numpy(const Tensor& t) {
  LOOM_CHECK(t.device().is_cpu(), "numpy: the tensor is on {}; copy it with .to('cpu') first", t.device());
  LOOM_CHECK(!t.requires_grad(), "numpy: the tensor requires grad; use .detach().numpy()");
  const auto item = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * item);
  // The array's base holds the storage: the memory lives while either does.
  auto* keep = new std::shared_ptr<Storage>(t.storage());
  py::capsule base(keep, [](void* p) { delete static_cast<std::shared_ptr<Storage>*>(p); });
  return py::array(numpy_dtype_of(t.dtype()), t.shape(), strides, t.raw_data(), base);
}

py::buffer_info buffer_of(const Tensor& t) {
  LOOM_CHECK(t.device().is_cpu(), "buffer: the tensor is on {}; copy it with .to('cpu') first", t.device());
  const auto item = static_cast<py::ssize_t>(dtype_size(t.dtype()));
  std::vector<py::ssize_t> strides;
  for (int64_t s : t.strides()) strides.push_back(s * item);
  return py::buffer_info(t.raw_data(), item, py::str(numpy_dtype_of(t.dtype()).attr("char")), t.dim(),
                         std::vector<py::ssize_t>(t.shape().begin(), t.shape().end()), strides);
}

// ---- DLPack (v0.6, what PyTorch 1.13 speaks) ----
struct Exported {  // what a DLManagedTensor made from a loom tensor owns
  Tensor tensor;
  std::vector<int64_t> shape, strides;
  DLManagedTensor managed;
};

std::pair<int, int> dlpack_device(const Tensor& t) {
  const Device d = t.device();
  if (d.is_cpu()) return {kDLCPU, 0};
  if (d.is_cuda()) return {kDLCUDA, d.index};
  fail("__dlpack__: a tensor on {} has no DLPack device", d);
}

py::capsule to_dlpack(const Tensor& t, const py::object& stream) {
  auto [device_type, device_id] = dlpack_device(t);
  auto* exported = new Exported{t, t.shape(), t.strides(), {}};
  DLTensor& dl = exported->managed.dl_tensor;
  dl.data = first_element(t);
  dl.device = {static_cast<DLDeviceType>(device_type), device_id};
  dl.ndim = static_cast<int32_t>(t.dim());
  for (const auto& code : kCodes)
    if (code.dtype == t.dtype()) dl.dtype = code.dlpack;
  dl.shape = exported->shape.data();
  dl.strides = exported->strides.data();
  dl.byte_offset = 0;
  exported->managed.manager_ctx = exported;
  exported->managed.deleter = [](DLManagedTensor* self) { delete static_cast<Exported*>(self->manager_ctx); };
  // A capsule nobody consumed deletes its tensor; a consumer renames it "used_dltensor" and owns it.
  return py::capsule(&exported->managed, "dltensor", [](PyObject* capsule) {
    if (PyCapsule_IsValid(capsule, "dltensor")) {
      auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(capsule, "dltensor"));
      managed->deleter(managed);
    }
  });
}

Tensor from_dlpack(const py::object& source) {
  py::object capsule = source;
  if (py::hasattr(source, "__dlpack__")) capsule = source.attr("__dlpack__")();
  PyObject* raw = capsule.ptr();
  if (!PyCapsule_IsValid(raw, "dltensor"))
    throw py::type_error("from_dlpack: expected an object with __dlpack__ or an unused 'dltensor' capsule");
  auto* managed = static_cast<DLManagedTensor*>(PyCapsule_GetPointer(raw, "dltensor"));
  const DLTensor& dl = managed->dl_tensor;
  DType dtype = DType::f32;
  bool known = false;
  for (const auto& code : kCodes)
    if (code.dlpack.code == dl.dtype.code && code.dlpack.bits == dl.dtype.bits && dl.dtype.lanes == 1) {
      dtype = code.dtype;
      known = true;
    }
  if (!known) {
    const std::string named =
        py::hasattr(source, "dtype") ? " (" + py::str(source.attr("dtype")).cast<std::string>() + ")" : "";
    throw py::type_error(
        fmt::format("from_dlpack: loom has no dtype for DLPack code {} with {} bits{} (float32, "
                    "float64, int32, int64, bool and bfloat16 are shared)",
                    static_cast<int>(dl.dtype.code), static_cast<int>(dl.dtype.bits), named));
  }
  Device device = kCPU;
  if (dl.device.device_type == kDLCUDA)
    device = Device::cuda(dl.device.device_id);
  else if (dl.device.device_type != kDLCPU)
    throw py::value_error(fmt::format("from_dlpack: DLPack device type {} is not one loom runs on",
                                      static_cast<int>(dl.device.device_type)));
  Shape shape(dl.shape, dl.shape + dl.ndim);
  Shape strides = dl.strides ? Shape(dl.strides, dl.strides + dl.ndim) : contiguous_strides(shape);
  LOOM_CHECK(dl.byte_offset % dtype_size(dtype) == 0, "from_dlpack: byte offset {} is not whole elements",
             dl.byte_offset);
  void* data = static_cast<char*>(dl.data) + dl.byte_offset;
  PyCapsule_SetName(raw, "used_dltensor");  // loom owns it now: the producer's deleter runs when loom is done
  return borrowed_tensor(data, dtype, device, std::move(shape), std::move(strides),
                         [managed] { managed->deleter(managed); });
}

}  // namespace

void bind_interop(py::module_& m) {
  m.def("from_numpy", &from_numpy, py::arg("array"),
        "A tensor sharing the array's memory (float32/64, int32/64, bool): writes show in both.");
  m.def("from_dlpack", &from_dlpack, py::arg("source"),
        "A tensor sharing the memory of any object with __dlpack__ (a torch tensor), or of a DLPack capsule.");
  auto cls = py::reinterpret_borrow<py::class_<Tensor>>(m.attr("Tensor"));
  cls.def("numpy", &to_numpy, "An ndarray sharing the tensor's memory (CPU, no gradient)")
      .def_buffer(&buffer_of)
      .def("__dlpack__", &to_dlpack, py::arg("stream") = py::none())
      .def("__dlpack_device__",
           [](const Tensor& t) {
             auto [type, id] = dlpack_device(t);
             return py::make_tuple(type, id);
           })
      .def("data_ptr", [](const Tensor& t) { return reinterpret_cast<uintptr_t>(first_element(t)); });
}

}  // namespace loom::python
