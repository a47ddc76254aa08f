/*
 * jitk._jitk: the CPython extension over libjitk.
 *
 * It is written against the limited API of Python 3.10, so one abi3 wheel
 * serves every CPython from 3.10 on; libjitk's objects are linked into it.
 * The per-call path is C: a cached kernel call reads its arguments' array
 * descriptions straight from CuPy arrays and PyTorch tensors (any other
 * array through DLPack or __cuda_array_interface__), builds jitk_args on
 * the stack, and launches through the C API with the GIL released. No
 * Python object is made on that path except what the array libraries
 * return to the attribute reads, and the outputs it allocates.
 *
 * Module state lives in static variables: the extension is loaded once per
 * process (it does not support subinterpreters), and its engines, one per
 * device, are the process's. The library itself keeps no such state.
 */
#define Py_LIMITED_API 0x030A0000
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <jitk/jitk.h>

#include <ctype.h>
#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

/* The most arguments one call takes on the stack; jitk's generated
 * kernels take at most 64 parameters, raw kernels at most this many. */
#define MAX_ARGS 128
#define MAX_DEVICES 64

enum { LIB_OTHER = 0, LIB_CUPY = 1, LIB_TORCH = 2 };

/* ------------------------------------------------------------------ */
/* Module state                                                       */
/* ------------------------------------------------------------------ */

static PyObject *JitkError;          /* jitk.JitkError(RuntimeError) */
static PyObject *CompileError;       /* jitk.CompileError(jitk.JitkError) */
static PyObject *PerformanceWarning; /* jitk.PerformanceWarning(RuntimeWarning) */

static jitk_engine *engines[MAX_DEVICES];
/* Bit p of peers_on[d]: device d's engine reaches device p's memory, as
 * the package enabled it (pick_device), so later calls neither ask the
 * driver again nor warn again. Read and set under the GIL. */
static uint64_t peers_on[MAX_DEVICES];
static int num_devices = -1; /* -1: not asked yet */
static char no_device_why[1024];

/* Compile-only engines by target, for parsing and for compile() calls. */
typedef struct arch_engine {
  char arch[24];
  jitk_engine *engine;
} arch_engine;
static arch_engine arch_engines[16];

/* Interned attribute names. */
static PyObject *s_data, *s_ptr, *s_device_id, *s_shape, *s_strides, *s_c_contiguous, *s_dtype,
    *s_kind, *s_itemsize, *s_name, *s_is_cuda, *s_data_ptr, *s_stride, *s_get_device, *s_dlpack,
    *s_dlpack_device, *s_cai, *s_cuda_stream_proto, *s_cuda_stream, *s_item, *s_stream,
    *s_max_version, *s_str, *s_empty, *s_device, *s_dtype_kw, *s_typestr, *s_version, *s_mask,
    *s_shape_key, *s_strides_key, *s_data_key, *s_stream_key, *s_real, *s_imag, *s_cached_codes;

/* The array libraries, found when their arrays first appear. */
static PyObject *cupy_ndarray_type;          /* cupy.ndarray */
static PyObject *cupy_get_current_stream;    /* cupy.cuda.get_current_stream */
static PyObject *cupy_get_device;            /* cupy.cuda.runtime.getDevice */
static PyObject *cupy_device_type;           /* cupy.cuda.Device */
static PyObject *torch_tensor_type;          /* torch.Tensor */
static PyObject *torch_current_stream;       /* torch.cuda.current_stream */
static PyObject *torch_empty;                /* torch.empty */
static PyObject *torch_device_fn;            /* torch.device */
static PyObject *torch_devices[MAX_DEVICES]; /* torch.device("cuda", d), made once */
/* torch.empty's keywords {dtype, device} by dtype and device, made once:
 * callees never change a caller's keyword dict. */
static PyObject *torch_empty_kw[JITK_DTYPE_COUNT][MAX_DEVICES];
static PyObject *numpy_dtypes[JITK_DTYPE_COUNT]; /* numpy.dtype of each jitk dtype, made once */
static PyObject *numpy_generic_type;             /* numpy.generic */
static PyObject *cupy_memptr_type;               /* cupy.cuda.memory.MemoryPointer */
typedef struct {
  PyTypeObject *type;
  jitk_dtype dtype;
} scalar_type_slot;
static scalar_type_slot scalar_type_cache[32]; /* NumPy scalar types seen */
static int scalar_type_cache_n;

/* dtype objects seen, to jitk dtypes: numpy.dtype and torch.dtype
 * objects are (nearly always) singletons, so a pointer compare finds them. */
typedef struct dtype_slot {
  PyObject *obj; /* strong reference */
  jitk_dtype dtype;
} dtype_slot;
static dtype_slot dtype_cache[64];
static int dtype_cache_n;

/* torch dtype objects by jitk dtype, for allocating outputs. */
static PyObject *torch_dtypes[32];

/* ------------------------------------------------------------------ */
/* Errors                                                             */
/* ------------------------------------------------------------------ */

/* NumPy's AxisError (a ValueError and an IndexError), which CuPy raises
 * for an axis out of range, as a new reference; ValueError where NumPy
 * cannot be imported. Looked up when raised, so importing jitk does not
 * import NumPy. */
static PyObject *axis_error_type(void) {
  PyObject *np = PyImport_ImportModule("numpy");
  PyObject *type = NULL;
  if (np != NULL) {
    PyObject *ex = PyObject_GetAttrString(np, "exceptions");
    type = ex != NULL ? PyObject_GetAttrString(ex, "AxisError")
                      : PyObject_GetAttrString(np, "AxisError");
    Py_XDECREF(ex);
    Py_DECREF(np);
  }
  PyErr_Clear();
  if (type == NULL || !PyType_Check(type) ||
      !PyType_IsSubtype((PyTypeObject *)type, (PyTypeObject *)PyExc_ValueError)) {
    Py_XDECREF(type);
    type = Py_NewRef(PyExc_ValueError);
  }
  return type;
}

/* Raises the Python exception that matches a jitk failure, with the
 * library's message. The types follow CuPy's for the same mistakes. */
static PyObject *raise_status(jitk_engine *e, jitk_status st, const char *what) {
  const char *msg = jitk_errmsg(e);
  PyObject *type = JitkError;
  switch (st) {
    case JITK_ERR_PARSE:
    case JITK_ERR_INVALID_ARGUMENT:
    case JITK_ERR_INVALID_ARRAY: type = PyExc_ValueError; break;
    case JITK_ERR_ARGUMENT_COUNT:
    case JITK_ERR_ARGUMENT_TYPE: type = PyExc_TypeError; break;
    case JITK_ERR_OUT_OF_MEMORY: type = PyExc_MemoryError; break;
    case JITK_ERR_COMPILE: type = CompileError; break;
    default: break;
  }
  if (type == CompileError) {
    /* The exception carries the log as an attribute as well. */
    PyObject *err = PyObject_CallFunction(CompileError, "s", msg);
    if (err != NULL) {
      PyObject *log = PyUnicode_FromString(msg);
      if (log != NULL) {
        PyObject_SetAttrString(err, "log", log);
        Py_DECREF(log);
      }
      /* annotate_compile_error fills these in where the caller knows them. */
      PyObject_SetAttrString(err, "source", Py_None);
      PyObject_SetAttrString(err, "options", Py_None);
      PyObject_SetAttrString(err, "name", Py_None);
      PyErr_Clear();
      PyErr_SetObject(CompileError, err);
      Py_DECREF(err);
    }
    return NULL;
  }
  PyObject *axis = st == JITK_ERR_AXIS ? axis_error_type() : NULL;
  if (axis != NULL) type = axis;
  if (what != NULL && *what != '\0')
    PyErr_Format(type, "%s: %s", what, msg);
  else
    PyErr_SetString(type, msg);
  Py_XDECREF(axis);
  return NULL;
}

/* Completes a CompileError being raised with what CuPy's
 * CompileException carries besides the log: the source NVRTC was given
 * (for generated kernels, the generated source), the options and the
 * kernel's name. Anything else being raised is left as it is. */
static void annotate_compile_error(const char *source, PyObject *options, PyObject *name) {
  if (!PyErr_ExceptionMatches(CompileError)) return;
  PyObject *type, *value, *tb;
  PyErr_Fetch(&type, &value, &tb);
  PyErr_NormalizeException(&type, &value, &tb);
  if (value != NULL) {
    PyObject *src = source ? PyUnicode_FromString(source) : Py_NewRef(Py_None);
    if (src == NULL) PyErr_Clear();
    if (src != NULL && PyObject_SetAttrString(value, "source", src) != 0) PyErr_Clear();
    Py_XDECREF(src);
    if (PyObject_SetAttrString(value, "options", options ? options : Py_None) != 0) PyErr_Clear();
    if (PyObject_SetAttrString(value, "name", name ? name : Py_None) != 0) PyErr_Clear();
  }
  PyErr_Restore(type, value, tb);
}

/* An elementwise call's failure, in CuPy's words where its users look
 * for them: an output of the wrong shape is "Out shape is mismatched". */
static PyObject *raise_elementwise(jitk_engine *e, jitk_status st) {
  const char *msg = jitk_errmsg(e);
  if (st == JITK_ERR_INVALID_ARRAY && strstr(msg, "the shape the inputs broadcast to") != NULL) {
    PyErr_Format(PyExc_ValueError, "Out shape is mismatched: %s", msg);
    return NULL;
  }
  return raise_status(e, st, NULL);
}

/* ------------------------------------------------------------------ */
/* Pickling                                                           */
/* ------------------------------------------------------------------ */

/* Kernels and modules pickle as the arguments they were made with, as
 * CuPy's RawKernel and RawModule do, so that they can go to other
 * processes (multiprocessing, Dask, Ray): unpickling makes them again
 * through _rebuild (a kernel of a module, through _rebuild_kernel), and
 * the new object compiles at its first use, where the kernel cache most
 * often serves it. What the driver holds does not travel: loaded modules,
 * the specializations compiled, and attributes set on a kernel
 * (max_dynamic_shared_size_bytes, the carveout), as under CuPy. */
static PyObject *rebuild_fn, *rebuild_kernel_fn;

/* (_rebuild, (type(self), kwargs)) for __reduce__, kwargs holding keys[i]
 * = values[i] (borrowed) for each value that is not NULL. */
static PyObject *reduce_to(PyObject *self, char *const *keys, PyObject *const *values, int n) {
  PyObject *kw = PyDict_New();
  if (kw == NULL) return NULL;
  for (int i = 0; i < n; i++)
    if (values[i] != NULL && PyDict_SetItemString(kw, keys[i], values[i]) != 0) {
      Py_DECREF(kw);
      return NULL;
    }
  return Py_BuildValue("O(ON)", rebuild_fn, (PyObject *)Py_TYPE(self), kw);
}

static PyObject *py_bool(int v) { return v ? Py_True : Py_False; }

/* ------------------------------------------------------------------ */
/* Engines                                                            */
/* ------------------------------------------------------------------ */

static int count_devices(void) {
  if (num_devices >= 0) return num_devices;
  int n = 0, version = 0;
  jitk_status st = jitk_driver_query(NULL, &version, &n);
  if (st != JITK_OK) {
    snprintf(no_device_why, sizeof no_device_why, "%s", jitk_errmsg(NULL));
    n = 0;
  }
  num_devices = n;
  return n;
}

/* The package's engines share compiled images (jitk_engine_config.
 * share_images_with): each joins the group of the first one made, so a
 * kernel used on several devices of one architecture, or compiled ahead
 * with compile(), is compiled once. Engines live until the module is
 * unloaded, so the one named outlives every engine_create. */
static jitk_engine *share_peer(void) {
  for (int d = 0; d < MAX_DEVICES; d++)
    if (engines[d] != NULL) return engines[d];
  for (size_t i = 0; i < sizeof arch_engines / sizeof arch_engines[0]; i++)
    if (arch_engines[i].engine != NULL) return arch_engines[i].engine;
  return NULL;
}

/* Whether `device` indexes the tables of MAX_DEVICES entries (arrays'
 * devices are checked as they are read; this is for the current device,
 * which the CUDA runtime names); if not, a ValueError. */
static bool device_in_range(int device) {
  if (device >= 0 && device < MAX_DEVICES) return true;
  PyErr_Format(PyExc_ValueError, "device %d is out of range", device);
  return false;
}

static jitk_engine *device_engine(int ordinal) {
  if (!device_in_range(ordinal)) return NULL;
  if (engines[ordinal] != NULL) return engines[ordinal];
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = ordinal;
  cfg.share_images_with = share_peer();
  jitk_engine *e = NULL;
  jitk_status st;
  /* Creating an engine initializes the driver: the GIL goes meanwhile. */
  Py_BEGIN_ALLOW_THREADS st = jitk_engine_create(&cfg, &e);
  Py_END_ALLOW_THREADS if (st != JITK_OK) {
    PyErr_Format(
        st == JITK_ERR_NO_DRIVER || st == JITK_ERR_NO_DEVICE ? PyExc_RuntimeError : JitkError,
        "no jitk engine for CUDA device %d: %s", ordinal, jitk_errmsg(NULL));
    return NULL;
  }
  /* Another thread may have made one while the GIL was free. */
  if (engines[ordinal] != NULL) {
    jitk_engine_destroy(e);
    return engines[ordinal];
  }
  engines[ordinal] = e;
  return e;
}

/* A compile-only engine for `arch`; NULL arch is the first device's
 * target when there is a device, else sm_90. */
static jitk_engine *arch_engine_for(const char *arch) {
  char want[24];
  if (arch == NULL) {
    if (count_devices() > 0) {
      jitk_engine *d = device_engine(0);
      if (d == NULL) return NULL;
      const char *a = NULL;
      jitk_engine_arch(d, &a);
      snprintf(want, sizeof want, "%s", a ? a : "sm_90");
    } else {
      snprintf(want, sizeof want, "sm_90");
    }
  } else {
    if (strlen(arch) >= sizeof want) {
      PyErr_Format(PyExc_ValueError, "arch \"%s\" is not a target name", arch);
      return NULL;
    }
    snprintf(want, sizeof want, "%s", arch);
  }
  for (size_t i = 0; i < sizeof arch_engines / sizeof arch_engines[0]; i++) {
    if (arch_engines[i].engine == NULL) {
      jitk_engine_config cfg;
      jitk_engine_config_init(&cfg);
      cfg.device = JITK_DEVICE_NONE;
      cfg.arch = want;
      cfg.share_images_with = share_peer();
      jitk_engine *e = NULL;
      jitk_status st = jitk_engine_create(&cfg, &e);
      if (st != JITK_OK) {
        PyErr_Format(st == JITK_ERR_INVALID_ARGUMENT || st == JITK_ERR_UNSUPPORTED
                         ? PyExc_ValueError
                         : JitkError,
                     "%s", jitk_errmsg(NULL));
        return NULL;
      }
      snprintf(arch_engines[i].arch, sizeof arch_engines[i].arch, "%s", want);
      arch_engines[i].engine = e;
      return e;
    }
    if (strcmp(arch_engines[i].arch, want) == 0) return arch_engines[i].engine;
  }
  PyErr_SetString(JitkError, "too many compile targets in one process (16 at most)");
  return NULL;
}

/* The engine kernels are parsed with at construction: no GPU needed. */
static jitk_engine *parse_engine(void) { return arch_engine_for("sm_90"); }

/* ------------------------------------------------------------------ */
/* dtypes                                                             */
/* ------------------------------------------------------------------ */

static jitk_dtype dtype_from_kind(char kind, long itemsize, const char *name) {
  switch (kind) {
    case 'b': return itemsize == 1 ? JITK_BOOL : JITK_DTYPE_NONE;
    case 'i':
      return itemsize == 1   ? JITK_INT8
             : itemsize == 2 ? JITK_INT16
             : itemsize == 4 ? JITK_INT32
             : itemsize == 8 ? JITK_INT64
                             : JITK_DTYPE_NONE;
    case 'u':
      return itemsize == 1   ? JITK_UINT8
             : itemsize == 2 ? JITK_UINT16
             : itemsize == 4 ? JITK_UINT32
             : itemsize == 8 ? JITK_UINT64
                             : JITK_DTYPE_NONE;
    case 'f':
      return itemsize == 2   ? JITK_FLOAT16
             : itemsize == 4 ? JITK_FLOAT32
             : itemsize == 8 ? JITK_FLOAT64
                             : JITK_DTYPE_NONE;
    case 'c':
      return itemsize == 8 ? JITK_COMPLEX64 : itemsize == 16 ? JITK_COMPLEX128 : JITK_DTYPE_NONE;
    case 'V':
      /* ml_dtypes' bfloat16 and 8-bit floats, as NumPy sees them. */
      if (name == NULL) return JITK_DTYPE_NONE;
      return strcmp(name, "bfloat16") == 0        ? JITK_BFLOAT16
             : strcmp(name, "float8_e4m3fn") == 0 ? JITK_FLOAT8_E4M3
             : strcmp(name, "float8_e5m2") == 0   ? JITK_FLOAT8_E5M2
                                                  : JITK_DTYPE_NONE;
    default: return JITK_DTYPE_NONE;
  }
}

/* torch.float32 and friends, by their repr without the "torch." prefix. */
static jitk_dtype dtype_from_torch_name(const char *n) {
  static const struct {
    const char *name;
    jitk_dtype dtype;
  } names[] = {{"bool", JITK_BOOL},
               {"int8", JITK_INT8},
               {"int16", JITK_INT16},
               {"int32", JITK_INT32},
               {"int64", JITK_INT64},
               {"uint8", JITK_UINT8},
               {"uint16", JITK_UINT16},
               {"uint32", JITK_UINT32},
               {"uint64", JITK_UINT64},
               {"float16", JITK_FLOAT16},
               {"bfloat16", JITK_BFLOAT16},
               {"float32", JITK_FLOAT32},
               {"float64", JITK_FLOAT64},
               {"complex64", JITK_COMPLEX64},
               {"complex128", JITK_COMPLEX128},
               {"float8_e4m3fn", JITK_FLOAT8_E4M3},
               {"float8_e5m2", JITK_FLOAT8_E5M2}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++)
    if (strcmp(n, names[i].name) == 0) return names[i].dtype;
  return JITK_DTYPE_NONE;
}

/* The jitk dtype of a numpy.dtype, a torch.dtype, or anything with kind
 * and itemsize; JITK_DTYPE_NONE (no exception) when it has none. */
static jitk_dtype dtype_of(PyObject *d) {
  for (int i = 0; i < dtype_cache_n; i++)
    if (dtype_cache[i].obj == d) return dtype_cache[i].dtype;
  jitk_dtype r = JITK_DTYPE_NONE;
  PyObject *kind = PyObject_GetAttr(d, s_kind);
  if (kind != NULL) {
    PyObject *size = PyObject_GetAttr(d, s_itemsize);
    PyObject *name = PyObject_GetAttr(d, s_name);
    const char *k = PyUnicode_Check(kind) ? PyUnicode_AsUTF8AndSize(kind, NULL) : NULL;
    const char *nm = name && PyUnicode_Check(name) ? PyUnicode_AsUTF8AndSize(name, NULL) : NULL;
    if (k != NULL && size != NULL) r = dtype_from_kind(k[0], PyLong_AsLong(size), nm);
    Py_XDECREF(size);
    Py_XDECREF(name);
    Py_DECREF(kind);
  }
  PyErr_Clear();
  if (r == JITK_DTYPE_NONE) {
    /* torch.dtype: "torch.float32". */
    PyObject *s = PyObject_Str(d);
    const char *t = s ? PyUnicode_AsUTF8AndSize(s, NULL) : NULL;
    if (t != NULL && strncmp(t, "torch.", 6) == 0) r = dtype_from_torch_name(t + 6);
    Py_XDECREF(s);
    PyErr_Clear();
  }
  if (r != JITK_DTYPE_NONE && dtype_cache_n < (int)(sizeof dtype_cache / sizeof dtype_cache[0])) {
    Py_INCREF(d);
    dtype_cache[dtype_cache_n].obj = d;
    dtype_cache[dtype_cache_n++].dtype = r;
  }
  return r;
}

/* A __cuda_array_interface__ typestr such as "<f4". */
static jitk_dtype dtype_from_typestr(const char *t) {
  if (t == NULL || strlen(t) < 3) return JITK_DTYPE_NONE;
  if (t[0] == '>') return JITK_DTYPE_NONE; /* big-endian data: not for a GPU */
  long size = strtol(t + 2, NULL, 10);
  return dtype_from_kind(t[1], size, NULL);
}

static const char *dtype_name(jitk_dtype d) {
  jitk_dtype_info info;
  if (jitk_dtype_get_info(d, &info) != JITK_OK) return "?";
  return info.name;
}

static size_t dtype_size(jitk_dtype d) {
  jitk_dtype_info info;
  if (jitk_dtype_get_info(d, &info) != JITK_OK) return 0;
  return info.size;
}

static DLDataType dtype_dl(jitk_dtype d) {
  jitk_dtype_info info;
  DLDataType z = {0, 0, 0};
  if (jitk_dtype_get_info(d, &info) != JITK_OK) return z;
  return info.dl;
}

/* ------------------------------------------------------------------ */
/* Array libraries                                                    */
/* ------------------------------------------------------------------ */

/* sys.modules[name] when it is imported, else NULL (no exception): jitk
 * never imports an array library itself until it has seen its arrays. */
static PyObject *imported(const char *name) {
  PyObject *n = PyUnicode_FromString(name);
  if (n == NULL) return NULL;
  PyObject *m = PyImport_GetModule(n);
  Py_DECREF(n);
  if (m == NULL) PyErr_Clear();
  return m;
}

static PyObject *attr_path(PyObject *m, const char *path) {
  PyObject *cur = m;
  Py_INCREF(cur);
  char part[64];
  while (*path) {
    const char *dot = strchr(path, '.');
    size_t n = dot ? (size_t)(dot - path) : strlen(path);
    if (n >= sizeof part) n = sizeof part - 1;
    memcpy(part, path, n);
    part[n] = '\0';
    PyObject *next = PyObject_GetAttrString(cur, part);
    Py_DECREF(cur);
    if (next == NULL) return NULL;
    cur = next;
    path += n + (dot != NULL);
    if (dot == NULL) break;
  }
  return cur;
}

static void find_cupy(void) {
  if (cupy_ndarray_type != NULL) return;
  PyObject *m = imported("cupy");
  if (m == NULL) return;
  cupy_ndarray_type = attr_path(m, "ndarray");
  /* The current stream's handle as an int, without a Stream object, where
   * CuPy offers it; else the current Stream (cached per thread by CuPy),
   * whose .ptr default_stream reads. */
  cupy_get_current_stream = attr_path(m, "cuda.stream.get_current_stream_ptr");
  if (cupy_get_current_stream == NULL) {
    PyErr_Clear();
    cupy_get_current_stream = attr_path(m, "cuda.get_current_stream");
  }
  cupy_device_type = attr_path(m, "cuda.Device");
  cupy_get_device = attr_path(m, "cuda.runtime.getDevice");
  if (cupy_get_device == NULL) PyErr_Clear();
  cupy_memptr_type = attr_path(m, "cuda.memory.MemoryPointer");
  if (cupy_memptr_type == NULL) PyErr_Clear();
  if (cupy_ndarray_type == NULL || cupy_get_current_stream == NULL) {
    Py_CLEAR(cupy_ndarray_type);
    Py_CLEAR(cupy_get_device);
    Py_CLEAR(cupy_get_current_stream);
    Py_CLEAR(cupy_device_type);
    Py_CLEAR(cupy_memptr_type);
  }
  PyErr_Clear();
  Py_DECREF(m);
}

static void find_torch(void) {
  if (torch_tensor_type != NULL) return;
  PyObject *m = imported("torch");
  if (m == NULL) return;
  torch_tensor_type = attr_path(m, "Tensor");
  torch_empty = attr_path(m, "empty");
  torch_device_fn = attr_path(m, "device");
  /* The raw handle of the current stream, as PyTorch's own compilers take
   * it; torch.cuda.current_stream() builds a Stream object each call. */
  torch_current_stream = attr_path(m, "_C._cuda_getCurrentRawStream");
  if (torch_current_stream == NULL) {
    PyErr_Clear();
    torch_current_stream = attr_path(m, "cuda.current_stream");
  }
  PyErr_Clear();
  static const char *names[] = {NULL,         "bool",          "int8",       "int16",   "int32",
                                "int64",      "uint8",         "uint16",     "uint32",  "uint64",
                                "float16",    "bfloat16",      "float32",    "float64", "complex64",
                                "complex128", "float8_e4m3fn", "float8_e5m2"};
  _Static_assert(sizeof names / sizeof names[0] == JITK_DTYPE_COUNT, "a torch name per dtype");
  for (int d = 1; d < JITK_DTYPE_COUNT; d++) {
    torch_dtypes[d] = PyObject_GetAttrString(m, names[d]);
    if (torch_dtypes[d] == NULL) PyErr_Clear(); /* an older torch without uint16 or float8 */
  }
  if (torch_tensor_type == NULL || torch_empty == NULL || torch_current_stream == NULL) {
    Py_CLEAR(torch_tensor_type);
    Py_CLEAR(torch_empty);
    Py_CLEAR(torch_current_stream);
  }
  PyErr_Clear();
  Py_DECREF(m);
}

/* The name of o's type, for messages (the limited API hides tp_name). */
static void type_name(PyObject *o, char *buf, size_t size) {
  snprintf(buf, size, "?");
  PyObject *n = PyObject_GetAttrString((PyObject *)Py_TYPE(o), "__name__");
  const char *t = n && PyUnicode_Check(n) ? PyUnicode_AsUTF8AndSize(n, NULL) : NULL;
  if (t != NULL) snprintf(buf, size, "%s", t);
  Py_XDECREF(n);
  PyErr_Clear();
}

static bool is_instance(PyObject *o, PyObject *type) {
  return type != NULL &&
         (Py_TYPE(o) == (PyTypeObject *)type || PyType_IsSubtype(Py_TYPE(o), (PyTypeObject *)type));
}

/* What jitk learned of an argument's type: its library, and for arrays of
 * other libraries which protocol their instances answer. A type's
 * library cannot change (a subclass of cupy.ndarray exists only once CuPy
 * is imported), so each type is classified once: without that, every
 * argument of every call asked sys.modules for CuPy and PyTorch when they
 * were not imported, and an array of a third library raised and cleared
 * an AttributeError for __dlpack__ before its __cuda_array_interface__
 * was read. The types are held, so their addresses stay theirs. */
enum { PROTO_UNKNOWN = 0, PROTO_CAI = 1 };
typedef struct type_slot {
  PyTypeObject *type;
  int lib;
  int proto;
} type_slot;
static type_slot type_cache[32];
static int type_cache_n;

static type_slot *type_slot_of(PyTypeObject *tp) {
  for (int i = 0; i < type_cache_n; i++)
    if (type_cache[i].type == tp) return &type_cache[i];
  return NULL;
}

/* Which library an argument's array belongs to; LIB_OTHER for anything
 * else (scalars too). */
static int lib_of(PyObject *o) {
  PyTypeObject *tp = Py_TYPE(o);
  type_slot *slot = type_slot_of(tp);
  if (slot != NULL) return slot->lib;
  if (cupy_ndarray_type == NULL) find_cupy();
  if (torch_tensor_type == NULL) find_torch();
  int lib = is_instance(o, cupy_ndarray_type)   ? LIB_CUPY
            : is_instance(o, torch_tensor_type) ? LIB_TORCH
                                                : LIB_OTHER;
  if (type_cache_n < (int)(sizeof type_cache / sizeof type_cache[0])) {
    Py_INCREF(tp);
    type_cache[type_cache_n].type = tp;
    type_cache[type_cache_n].lib = lib;
    type_cache[type_cache_n++].proto = PROTO_UNKNOWN;
  }
  return lib;
}

/* ------------------------------------------------------------------ */
/* Streams                                                            */
/* ------------------------------------------------------------------ */

/* A stream handle given as an int: 0, 1 and 2 (the legacy and per-thread
 * default streams) or a CUstream's address. A negative int or a bool is
 * refused: neither is a handle, and the driver would take any number it
 * was given for one and fault on it. */
static int long_to_stream(PyObject *v, jitk_stream *out) {
  if (PyBool_Check(v)) {
    PyErr_SetString(PyExc_TypeError, "a stream handle is an int, not a bool");
    return -1;
  }
  unsigned long long h = PyLong_AsUnsignedLongLong(v);
  if (h == (unsigned long long)-1 && PyErr_Occurred()) {
    if (!PyErr_ExceptionMatches(PyExc_OverflowError)) return -1;
    PyErr_Clear();
    PyObject *r = PyObject_Repr(v);
    const char *text = r != NULL ? PyUnicode_AsUTF8AndSize(r, NULL) : NULL;
    PyErr_Clear();
    PyErr_Format(PyExc_ValueError,
                 "stream handle %s is not one: a stream is 0, 1, 2 or a CUstream's address",
                 text != NULL ? text : "?");
    Py_XDECREF(r);
    return -1;
  }
  *out = (jitk_stream)(uintptr_t)h;
  return 0;
}

/* stream=: an int handle, anything with __cuda_stream__ (the protocol of
 * CUDA Python: (version, handle)), a CuPy Stream (.ptr) or a PyTorch
 * Stream (.cuda_stream). */
static int stream_from_object(PyObject *s, jitk_stream *out) {
  if (PyLong_Check(s)) return long_to_stream(s, out);
  PyObject *proto = PyObject_GetAttr(s, s_cuda_stream_proto);
  if (proto != NULL) {
    PyObject *t = PyObject_CallNoArgs(proto);
    Py_DECREF(proto);
    if (t == NULL) return -1;
    int r = -1;
    if (PyTuple_Check(t) && PyTuple_Size(t) == 2)
      r = long_to_stream(PyTuple_GetItem(t, 1), out);
    else
      PyErr_SetString(PyExc_TypeError, "__cuda_stream__() must return (version, handle)");
    Py_DECREF(t);
    return r;
  }
  PyErr_Clear();
  static PyObject **names[] = {&s_ptr, &s_cuda_stream};
  for (int i = 0; i < 2; i++) {
    PyObject *v = PyObject_GetAttr(s, *names[i]);
    if (v != NULL) {
      int r = PyLong_Check(v) ? long_to_stream(v, out) : -1;
      if (r != 0 && !PyErr_Occurred())
        PyErr_Format(PyExc_TypeError, "the stream's handle is not an int");
      Py_DECREF(v);
      return r;
    }
    PyErr_Clear();
  }
  char tn[128];
  type_name(s, tn, sizeof tn);
  PyErr_Format(PyExc_TypeError,
               "stream must be a CuPy or PyTorch stream, an object with __cuda_stream__, or an "
               "int handle, not %s",
               tn);
  return -1;
}

/* The current stream of the inputs' library on `device`, so a launch is
 * ordered with the user's other work on it; the legacy default stream for
 * arrays of other libraries. */
static int default_stream(int lib, int device, jitk_stream *out) {
  *out = NULL;
  if (lib == LIB_CUPY && cupy_get_current_stream != NULL) {
    PyObject *r = PyObject_CallNoArgs(cupy_get_current_stream);
    if (r == NULL) return -1;
    int st;
    if (PyLong_Check(r)) {
      st = long_to_stream(r, out);
    } else {
      /* A cupy.cuda.Stream: its .ptr, read directly (the __cuda_stream__
       * protocol that stream_from_object asks first costs a call and a
       * tuple on every launch). */
      PyObject *p = PyObject_GetAttr(r, s_ptr);
      if (p != NULL && PyLong_Check(p)) {
        st = long_to_stream(p, out);
      } else {
        /* Not CuPy's Stream after all: asked as any stream is. */
        PyErr_Clear();
        st = stream_from_object(r, out);
      }
      Py_XDECREF(p);
    }
    Py_DECREF(r);
    return st;
  }
  if (lib == LIB_TORCH && torch_current_stream != NULL) {
    PyObject *r = PyObject_CallFunction(torch_current_stream, "i", device);
    if (r == NULL) return -1;
    int st = PyLong_Check(r) ? long_to_stream(r, out) : stream_from_object(r, out);
    Py_DECREF(r);
    return st;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* Arrays                                                             */
/* ------------------------------------------------------------------ */

/* DLPack 1.0's versioned tensor, declared here since the dlpack headers
 * jitk builds with may be older. */
typedef struct dl_versioned {
  struct {
    uint32_t major, minor;
  } version;
  void *manager_ctx;
  void (*deleter)(struct dl_versioned *self);
  uint64_t flags;
  DLTensor dl_tensor;
} dl_versioned;

typedef struct pyarr {
  DLTensor t;
  int64_t shape[JITK_MAX_NDIM];
  int64_t strides[JITK_MAX_NDIM];
  jitk_dtype dtype;
  PyObject *hold; /* a DLPack capsule, released once the launch is queued */
  /* Why results written to it would be wrong or lost, or NULL: the
   * producer marked it read-only, or handed over a copy (DLPack's flags,
   * the interface's read-only bit). Outputs are refused such arrays. */
  const char *not_writable;
  /* Read through __dlpack__ before the call's stream was known: its
   * producer ordered its work before the legacy default stream (1), which
   * finish_stream then orders the call after. */
  bool legacy;
} pyarr;
/* A call's array arguments point at a pyarr's tensor, and the pyarr is
 * found from them. */
_Static_assert(offsetof(pyarr, t) == 0, "the tensor starts a pyarr");

/* Row-major strides, in elements, for the first nd extents of a->shape.
 * Unsigned arithmetic: extents whose product passes 2^63 wrap here, and
 * the library refuses such a shape. */
static void c_strides(pyarr *a, int nd) {
  uint64_t s = 1;
  for (int d = nd - 1; d >= 0; d--) {
    a->strides[d] = (int64_t)s;
    s *= a->shape[d] > 0 ? (uint64_t)a->shape[d] : 1u;
  }
}

/* Points a's tensor at its nd extents and strides, typed by a->dtype. */
static void set_tensor_layout(pyarr *a, int nd) {
  a->t.ndim = nd;
  a->t.shape = a->shape;
  a->t.strides = a->strides;
  a->t.dtype = dtype_dl(a->dtype);
  a->t.byte_offset = 0;
}

/* a's strides in elements from the tuple `strides` (of bytes where
 * strides_in_bytes) of an array of nd dimensions and elements of `item`
 * bytes. */
static int fill_strides(pyarr *a, PyObject *strides, Py_ssize_t nd, size_t item,
                        int strides_in_bytes, const char *what) {
  if (PyTuple_Size(strides) != nd) {
    PyErr_Format(PyExc_ValueError, "%s has %zd strides for %zd dimensions", what,
                 PyTuple_Size(strides), nd);
    return -1;
  }
  for (Py_ssize_t d = 0; d < nd; d++) {
    long long v = PyLong_AsLongLong(PyTuple_GetItem(strides, d));
    if (v == -1 && PyErr_Occurred()) return -1;
    if (strides_in_bytes) {
      if (item == 0 || v % (long long)item != 0) {
        PyErr_Format(PyExc_ValueError,
                     "%s has a stride of %lld bytes, not a multiple of its element size (%zu)",
                     what, v, item);
        return -1;
      }
      v /= (long long)item;
    }
    a->strides[d] = v;
  }
  return 0;
}

static int fill_shape(pyarr *a, PyObject *shape, PyObject *strides, int strides_in_bytes,
                      const char *what) {
  Py_ssize_t nd = PyTuple_Size(shape);
  if (nd < 0) return -1;
  if (nd > JITK_MAX_NDIM) {
    PyErr_Format(PyExc_ValueError, "%s has %zd dimensions; jitk takes at most %d", what, nd,
                 JITK_MAX_NDIM);
    return -1;
  }
  size_t item = dtype_size(a->dtype);
  for (Py_ssize_t d = 0; d < nd; d++) {
    a->shape[d] = PyLong_AsLongLong(PyTuple_GetItem(shape, d));
    if (a->shape[d] == -1 && PyErr_Occurred()) return -1;
  }
  if (strides == NULL || strides == Py_None) {
    c_strides(a, (int)nd);
  } else {
    /* The array interface says a tuple; a list, as some producers write,
     * is taken as one. */
    PyObject *st = PyTuple_Check(strides) ? (Py_INCREF(strides), strides) : NULL;
    if (st == NULL && PySequence_Check(strides)) st = PySequence_Tuple(strides);
    if (st == NULL) {
      PyErr_Clear();
      char type[64];
      type_name(strides, type, sizeof type);
      PyErr_Format(PyExc_TypeError, "%s's strides are a %s, not a tuple of integers", what, type);
      return -1;
    }
    int r = fill_strides(a, st, nd, item, strides_in_bytes, what);
    Py_DECREF(st);
    if (r != 0) return -1;
  }
  set_tensor_layout(a, (int)nd);
  return 0;
}

static int cpu_array_error(const char *what) {
  PyErr_Format(PyExc_TypeError,
               "%s is in host memory; jitk kernels take arrays on a CUDA device (move it with "
               "cupy.asarray, torch's .cuda() or the like)",
               what);
  return -1;
}

/*
 * CuPy's array attributes, read through their getters. The attributes
 * jitk reads (data, dtype, shape, strides, _c_contiguous, and a
 * MemoryPointer's ptr and device_id) are getset descriptors of CuPy's
 * extension types; calling the getter that attribute access would reach
 * skips the lookup through the type's dictionaries, a third or more of
 * each read. Only for instances of exactly cupy.ndarray and
 * MemoryPointer, and only where the class that first defines the name on
 * the type's chain of bases is the one whose getset table has it, so that
 * the getter is the one attribute access would call; otherwise, and for
 * every other type, attributes are read as usual.
 */
typedef struct fast_getter {
  getter get;
  void *closure;
} fast_getter;
enum {
  FG_DATA,
  FG_DTYPE,
  FG_SHAPE,
  FG_STRIDES,
  FG_CONTIGUOUS,
  FG_NDIM,
  FG_PTR,
  FG_DEVICE_ID,
  FG_COUNT
};
static fast_getter cupy_getters[FG_COUNT];
static int cupy_getters_state; /* 0: not looked for; 1: all found; -1: not used */

static bool find_getter(PyTypeObject *tp, const char *name, fast_getter *out) {
  for (PyTypeObject *t = tp; t != NULL; t = (PyTypeObject *)PyType_GetSlot(t, Py_tp_base)) {
    PyObject *dict = PyObject_GetAttrString((PyObject *)t, "__dict__");
    PyObject *v = dict != NULL ? PyMapping_GetItemString(dict, name) : NULL;
    Py_XDECREF(dict);
    if (v == NULL) {
      PyErr_Clear();
      if (dict == NULL) return false;
      continue;
    }
    Py_DECREF(v);
    for (PyGetSetDef *gs = (PyGetSetDef *)PyType_GetSlot(t, Py_tp_getset); gs && gs->name; gs++)
      if (strcmp(gs->name, name) == 0 && gs->get != NULL) {
        out->get = gs->get;
        out->closure = gs->closure;
        return true;
      }
    return false;
  }
  return false;
}

static bool cupy_fast_getters(void) {
  if (cupy_getters_state == 0) {
    static const char *const names[FG_COUNT] = {"data",          "dtype", "shape", "strides",
                                                "_c_contiguous", "ndim",  "ptr",   "device_id"};
    bool all = cupy_ndarray_type != NULL && cupy_memptr_type != NULL;
    for (int i = 0; all && i < FG_COUNT; i++) {
      PyObject *tp = i < FG_PTR ? cupy_ndarray_type : cupy_memptr_type;
      all = find_getter((PyTypeObject *)tp, names[i], &cupy_getters[i]);
    }
    cupy_getters_state = all ? 1 : -1;
  }
  return cupy_getters_state == 1;
}

/* o.NAME for a CuPy array or MemoryPointer; `exact` says whether o's type
 * is the one the getters were found on. */
static PyObject *cupy_attr(PyObject *o, bool exact, int which, PyObject *name) {
  if (exact) return cupy_getters[which].get(o, cupy_getters[which].closure);
  return PyObject_GetAttr(o, name);
}

/* An int attribute of a CuPy array through its getter; -1 with an
 * exception when it is not an int. */
static long long cupy_int(PyObject *o, int which) {
  PyObject *v = cupy_getters[which].get(o, cupy_getters[which].closure);
  long long r = v != NULL ? PyLong_AsLongLong(v) : -1;
  Py_XDECREF(v);
  return r;
}

/* The shape and strides of a CuPy array. A C-contiguous one (CuPy's
 * _c_contiguous flag, where this CuPy has it) needs no strides, which
 * saves reading a tuple that CuPy builds anew at each access; a
 * C-contiguous one of one dimension not even its shape, which is
 * (len(o),): its ndim and its length cost a tenth of that tuple. */
static int cupy_layout(PyObject *o, bool exact, pyarr *a, const char *what) {
  PyObject *contiguous = cupy_attr(o, exact, FG_CONTIGUOUS, s_c_contiguous);
  if (contiguous == Py_True && exact) {
    long long nd = cupy_int(o, FG_NDIM);
    long long size = nd == 1 ? (long long)PyObject_Size(o) : 0;
    if ((nd == 0 || nd == 1) && size >= 0) {
      Py_DECREF(contiguous);
      a->shape[0] = size;
      c_strides(a, (int)nd);
      set_tensor_layout(a, (int)nd);
      return 0;
    }
    PyErr_Clear(); /* any other array: read as below */
  }
  PyObject *shape = cupy_attr(o, exact, FG_SHAPE, s_shape);
  if (shape == NULL) {
    Py_XDECREF(contiguous);
    return -1;
  }
  PyObject *strides = NULL;
  if (contiguous == Py_True) {
    strides = Py_NewRef(Py_None);
  } else {
    if (contiguous == NULL) PyErr_Clear();
    strides = cupy_attr(o, exact, FG_STRIDES, s_strides);
  }
  Py_XDECREF(contiguous);
  int r = strides ? fill_shape(a, shape, strides, 1, what) : -1;
  Py_DECREF(shape);
  Py_XDECREF(strides);
  return r;
}

/* Whether o is exactly a cupy.ndarray whose attributes the getters read. */
static bool cupy_exact(PyObject *o) {
  return (PyObject *)Py_TYPE(o) == cupy_ndarray_type && cupy_fast_getters();
}

/* The device number an array's library or producer reports, as `device`:
 * ValueError for one outside the devices jitk keeps engines for (a
 * negative one would otherwise read as "no device" and run on the current
 * device; a large one indexes tables of MAX_DEVICES entries). */
static int device_number(long long v, int *device, const char *what) {
  if (v < 0 || v >= MAX_DEVICES) {
    PyErr_Format(PyExc_ValueError, "%s is on CUDA device %lld; jitk works with devices 0 to %d",
                 what, v, MAX_DEVICES - 1);
    return -1;
  }
  *device = (int)v;
  return 0;
}

/* A CuPy array's o.data.ptr, and o.data.device_id where `device` is not
 * NULL; `exact` from cupy_exact(o). */
static int cupy_pointer(PyObject *o, bool exact, void **ptr, long long *device) {
  PyObject *data = cupy_attr(o, exact, FG_DATA, s_data);
  if (data == NULL) return -1;
  exact = exact && (PyObject *)Py_TYPE(data) == cupy_memptr_type;
  PyObject *p = cupy_attr(data, exact, FG_PTR, s_ptr);
  PyObject *dev =
      p != NULL && device != NULL ? cupy_attr(data, exact, FG_DEVICE_ID, s_device_id) : NULL;
  Py_DECREF(data);
  if (p == NULL || (device != NULL && dev == NULL)) {
    Py_XDECREF(p);
    return -1;
  }
  *ptr = PyLong_AsVoidPtr(p);
  if (device != NULL) *device = PyLong_AsLongLong(dev);
  Py_DECREF(p);
  Py_XDECREF(dev);
  return PyErr_Occurred() ? -1 : 0;
}

static int from_cupy(PyObject *o, pyarr *a, int *device, bool pointer_only, const char *what) {
  bool exact = cupy_exact(o);
  long long dev = -1;
  if (cupy_pointer(o, exact, &a->t.data, &dev) != 0 || device_number(dev, device, what) != 0)
    return -1;
  PyObject *dt = cupy_attr(o, exact, FG_DTYPE, s_dtype);
  if (dt == NULL) return -1;
  a->dtype = dtype_of(dt);
  Py_DECREF(dt);
  if (a->dtype == JITK_DTYPE_NONE) {
    PyErr_Format(PyExc_TypeError, "%s has a dtype jitk does not support", what);
    return -1;
  }
  /* An array whose address alone is passed (a raw kernel's `T *`) is
   * not asked for its shape and strides: CuPy and PyTorch build those
   * tuples anew at each read, the larger part of reading an array. */
  int r = 0;
  if (pointer_only)
    set_tensor_layout(a, 0);
  else
    r = cupy_layout(o, exact, a, what);
  a->t.device.device_type = kDLCUDA;
  a->t.device.device_id = *device;
  return r;
}

static int from_torch(PyObject *o, pyarr *a, int *device, bool pointer_only, const char *what) {
  PyObject *cuda = PyObject_GetAttr(o, s_is_cuda);
  if (cuda == NULL) return -1;
  int is_cuda = PyObject_IsTrue(cuda);
  Py_DECREF(cuda);
  if (is_cuda <= 0) return is_cuda < 0 ? -1 : cpu_array_error(what);
  PyObject *ptr = PyObject_CallMethodObjArgs(o, s_data_ptr, NULL);
  PyObject *dev = ptr ? PyObject_CallMethodObjArgs(o, s_get_device, NULL) : NULL;
  if (dev == NULL) {
    Py_XDECREF(ptr);
    return -1;
  }
  a->t.data = PyLong_AsVoidPtr(ptr);
  long long dev_id = PyLong_AsLongLong(dev);
  Py_DECREF(ptr);
  Py_DECREF(dev);
  if (PyErr_Occurred() || device_number(dev_id, device, what) != 0) return -1;
  PyObject *dt = PyObject_GetAttr(o, s_dtype);
  if (dt == NULL) return -1;
  a->dtype = dtype_of(dt);
  Py_DECREF(dt);
  if (a->dtype == JITK_DTYPE_NONE) {
    PyErr_Format(PyExc_TypeError, "%s has a dtype jitk does not support", what);
    return -1;
  }
  /* A complex tensor may be a lazy view (x.conj(), a negation): its data
   * are not its values, which jitk reads from the data alone. */
  if (a->dtype == JITK_COMPLEX64 || a->dtype == JITK_COMPLEX128) {
    static const char *const bits[][2] = {{"is_conj", "resolve_conj"}, {"is_neg", "resolve_neg"}};
    for (int i = 0; i < 2; i++) {
      PyObject *v = PyObject_CallMethod(o, bits[i][0], NULL);
      int set = v ? PyObject_IsTrue(v) : -1;
      Py_XDECREF(v);
      if (set < 0) {
        PyErr_Clear(); /* an older torch without the bit */
        continue;
      }
      if (set) {
        PyErr_Format(PyExc_ValueError,
                     "%s is a lazy view of another tensor (%s() is true); call .%s() first", what,
                     bits[i][0], bits[i][1]);
        return -1;
      }
    }
  }
  int r = 0;
  if (pointer_only) {
    set_tensor_layout(a, 0);
  } else {
    PyObject *shape = PyObject_GetAttr(o, s_shape);
    PyObject *strides = shape ? PyObject_CallMethodObjArgs(o, s_stride, NULL) : NULL;
    r = strides ? fill_shape(a, shape, strides, 0, what) : -1;
    Py_XDECREF(shape);
    Py_XDECREF(strides);
  }
  a->t.device.device_type = kDLCUDA;
  a->t.device.device_id = *device;
  return r;
}

static void release_capsule(PyObject *o) { Py_XDECREF(o); }

/* DLPack: a versioned capsule when the producer knows DLPack 1.0, else the
 * older one. The capsule is kept, unconsumed, until the launch is queued;
 * its destructor then returns the tensor to the producer. */
static int from_dlpack(PyObject *method, jitk_stream stream, pyarr *a, int *device,
                       const char *what) {
  /* The consumer's stream: the producer orders its pending work before
   * it. 1 is the legacy default stream in DLPack's numbering. */
  long long s = stream == NULL ? 1 : (long long)(uintptr_t)stream;
  PyObject *kw = Py_BuildValue("{s:L,s:(ii)}", "stream", s, "max_version", 1, 0);
  PyObject *noargs = PyTuple_New(0);
  PyObject *cap = kw && noargs ? PyObject_Call(method, noargs, kw) : NULL;
  if (cap == NULL && PyErr_ExceptionMatches(PyExc_TypeError)) {
    PyErr_Clear();
    PyObject *kw2 = Py_BuildValue("{s:L}", "stream", s);
    cap = kw2 ? PyObject_Call(method, noargs, kw2) : NULL;
    Py_XDECREF(kw2);
  }
  Py_XDECREF(kw);
  Py_XDECREF(noargs);
  if (cap == NULL) return -1;
  DLTensor *t = NULL;
  uint64_t flags = 0;
  if (PyCapsule_IsValid(cap, "dltensor_versioned")) {
    dl_versioned *v = PyCapsule_GetPointer(cap, "dltensor_versioned");
    if (v != NULL && v->version.major == 1) {
      t = &v->dl_tensor;
      flags = v->flags;
    }
  } else if (PyCapsule_IsValid(cap, "dltensor")) {
    DLManagedTensor *m = PyCapsule_GetPointer(cap, "dltensor");
    if (m != NULL) t = &m->dl_tensor;
  }
  if (t == NULL) {
    Py_DECREF(cap);
    PyErr_Format(PyExc_TypeError, "%s: __dlpack__ returned no DLPack tensor jitk can read", what);
    return -1;
  }
  a->hold = cap;
  a->legacy = stream == NULL;
  if (t->device.device_type == kDLCPU) return cpu_array_error(what);
  if (t->device.device_type != kDLCUDA && t->device.device_type != kDLCUDAManaged &&
      t->device.device_type != kDLCUDAHost) {
    PyErr_Format(PyExc_TypeError, "%s is on a device of DLPack type %d, not a CUDA device", what,
                 (int)t->device.device_type);
    return -1;
  }
  if (t->ndim > JITK_MAX_NDIM || t->ndim < 0) {
    PyErr_Format(PyExc_ValueError, "%s has %d dimensions; jitk takes at most %d", what, t->ndim,
                 JITK_MAX_NDIM);
    return -1;
  }
  if (jitk_dtype_from_dlpack(t->dtype, &a->dtype) != JITK_OK) {
    PyErr_Format(PyExc_TypeError,
                 "%s has a DLPack dtype (code %d, %d bits, %d lanes) jitk does not "
                 "support",
                 what, t->dtype.code, t->dtype.bits, t->dtype.lanes);
    return -1;
  }
  if (t->ndim > 0 && t->shape == NULL) {
    PyErr_Format(PyExc_ValueError, "%s: __dlpack__ gave %d dimensions and no shape", what, t->ndim);
    return -1;
  }
  /* DLPack 1.0's DLPACK_FLAG_BITMASK_READ_ONLY and _IS_COPIED. */
  if (flags & 1u)
    a->not_writable = "marked read-only by its producer";
  else if (flags & 2u)
    a->not_writable = "a copy its producer made (what is written to it would be lost)";
  a->t = *t;
  for (int d = 0; d < t->ndim; d++) a->shape[d] = t->shape[d];
  if (t->strides != NULL) {
    for (int d = 0; d < t->ndim; d++) a->strides[d] = t->strides[d];
  } else {
    c_strides(a, t->ndim);
  }
  a->t.shape = a->shape;
  a->t.strides = a->strides;
  return device_number(t->device.device_id, device, what);
}

static int cai_fields(PyObject *cai, jitk_stream stream, pyarr *a, int *device, const char *what);

/* Reads a __cuda_array_interface__ dict through a copy of it: reading it
 * runs the producer's code (a flag's __bool__, an extent's __index__),
 * which may change the dict, and the copy keeps alive every value being
 * read until the reading is done. */
static int from_cai(PyObject *cai, jitk_stream stream, pyarr *a, int *device, const char *what) {
  if (!PyDict_Check(cai)) {
    PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ is not a dict", what);
    return -1;
  }
  PyObject *own = PyDict_Copy(cai);
  if (own == NULL) return -1;
  int r = cai_fields(own, stream, a, device, what);
  Py_DECREF(own);
  return r;
}

static int cai_fields(PyObject *cai, jitk_stream stream, pyarr *a, int *device, const char *what) {
  PyObject *data = PyDict_GetItemWithError(cai, s_data_key);
  PyObject *shape = data ? PyDict_GetItemWithError(cai, s_shape_key) : NULL;
  PyObject *typestr = shape ? PyDict_GetItemWithError(cai, s_typestr) : NULL;
  if (typestr == NULL) {
    if (!PyErr_Occurred())
      PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ lacks data, shape or typestr",
                   what);
    return -1;
  }
  PyObject *strides = PyDict_GetItemWithError(cai, s_strides_key);
  PyObject *mask = PyDict_GetItemWithError(cai, s_mask);
  if (mask != NULL && mask != Py_None) {
    PyErr_Format(PyExc_TypeError, "%s is a masked array, which jitk does not take", what);
    return -1;
  }
  if (!PyTuple_Check(data) || PyTuple_Size(data) < 1 || !PyTuple_Check(shape)) {
    PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__ is malformed", what);
    return -1;
  }
  const char *ts = PyUnicode_Check(typestr) ? PyUnicode_AsUTF8AndSize(typestr, NULL) : NULL;
  PyErr_Clear(); /* a typestr that cannot be encoded names no dtype */
  a->dtype = dtype_from_typestr(ts);
  if (a->dtype == JITK_DTYPE_NONE) {
    PyErr_Format(PyExc_TypeError, "%s has typestr %s, which jitk does not support", what,
                 ts ? ts : "?");
    return -1;
  }
  a->t.data = PyLong_AsVoidPtr(PyTuple_GetItem(data, 0));
  if (PyErr_Occurred()) return -1;
  if (PyTuple_Size(data) > 1) {
    int ro = PyObject_IsTrue(PyTuple_GetItem(data, 1));
    if (ro < 0) return -1;
    if (ro) a->not_writable = "marked read-only by its producer";
  }
  if (fill_shape(a, shape, strides, 1, what) != 0) return -1;
  /* The interface names no device: the driver tells it from the pointer.
   * An empty array's pointer may be 0 (the interface allows it): it is on
   * whatever device the call runs on (-1 until pick_device says). */
  int dev = -1;
  jitk_status st;
  if (a->t.data != NULL) {
    jitk_engine *any = device_engine(0);
    if (any == NULL) return -1;
    int is_device = 0;
    st = jitk_pointer_device(any, a->t.data, &dev, &is_device);
    if (st != JITK_OK) return raise_status(any, st, what) ? 0 : -1;
    if (!is_device) return cpu_array_error(what);
    if (device_number(dev, &dev, what) != 0) return -1;
  }
  *device = dev;
  a->t.device.device_type = kDLCUDA;
  a->t.device.device_id = dev;
  /* Version 3: the producer's work on its stream must be done before
   * ours reads the data. Without events at hand, that stream is waited
   * for; it is skipped when it is ours. The interface's stream is an int
   * (1 and 2 the legacy and per-thread default streams) or None; 0, which
   * the interface disallows as ambiguous, is taken as the legacy stream,
   * as handle 0 is. */
  PyObject *ps = PyDict_GetItemWithError(cai, s_stream_key);
  if (ps == NULL && PyErr_Occurred()) return -1;
  if (ps != NULL && ps != Py_None && (!PyLong_Check(ps) || PyBool_Check(ps))) {
    PyErr_Format(PyExc_TypeError, "%s: __cuda_array_interface__'s stream must be an int or None",
                 what);
    return -1;
  }
  if (ps != NULL && ps != Py_None && dev >= 0) {
    int overflow = 0;
    long long sv = PyLong_AsLongLongAndOverflow(ps, &overflow);
    if (sv == -1 && PyErr_Occurred()) return -1;
    if ((sv < 0 && overflow == 0) || overflow < 0) {
      PyErr_Format(PyExc_ValueError,
                   "%s: __cuda_array_interface__'s stream is %lld; a stream is 1, 2 or a handle",
                   what, sv);
      return -1;
    }
    jitk_stream theirs;
    if (long_to_stream(ps, &theirs) != 0) return -1;
    if (theirs != stream) {
      jitk_engine *e = device_engine(dev);
      if (e == NULL) return -1;
      Py_BEGIN_ALLOW_THREADS st = jitk_stream_synchronize(e, theirs);
      Py_END_ALLOW_THREADS if (st != JITK_OK) return raise_status(e, st, what) ? 0 : -1;
    }
  }
  return 0;
}

/* Fills `a` from a GPU array of any library, and `device` with the device
 * it is on: one of those jitk keeps engines for, or -1 for an empty array
 * of the interface whose pointer is 0. 1: done; 0: `o` is not an array (no
 * exception); -1: an exception is set. */
static int read_array(PyObject *o, int lib, jitk_stream stream, pyarr *a, int *device,
                      bool pointer_only, const char *what) {
  /* The tensor and the capsule; shape and strides are written as read. */
  memset(&a->t, 0, sizeof a->t);
  a->dtype = JITK_DTYPE_NONE;
  a->hold = NULL;
  a->not_writable = NULL;
  a->legacy = false;
  int r;
  if (lib == LIB_CUPY) {
    r = from_cupy(o, a, device, pointer_only, what);
  } else if (lib == LIB_TORCH) {
    r = from_torch(o, a, device, pointer_only, what);
  } else {
    type_slot *slot = type_slot_of(Py_TYPE(o));
    if (slot != NULL && slot->proto == PROTO_CAI) {
      PyObject *cai = PyObject_GetAttr(o, s_cai);
      if (cai != NULL) {
        r = from_cai(cai, stream, a, device, what);
        Py_DECREF(cai);
        return r == 0 ? 1 : -1;
      }
      /* This instance lacks it: ask it everything below. An error other
       * than a missing attribute is the object's own (a property that
       * raises), which goes to the caller as getattr would pass it. */
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
    }
    PyObject *m = PyObject_GetAttr(o, s_dlpack);
    if (m != NULL) {
      /* Where the array lives is asked first (__dlpack_device__): a host
       * array's __dlpack__ may refuse the CUDA stream jitk would pass it,
       * with a message that does not say the array is the problem. */
      PyObject *dev = PyObject_CallMethod(o, "__dlpack_device__", NULL);
      if (dev == NULL) {
        PyErr_Clear();
      } else {
        long type = PyTuple_Check(dev) && PyTuple_Size(dev) == 2
                        ? PyLong_AsLong(PyTuple_GetItem(dev, 0))
                        : -1;
        Py_DECREF(dev);
        PyErr_Clear();
        if (type == kDLCPU) {
          Py_DECREF(m);
          return cpu_array_error(what);
        }
      }
      r = from_dlpack(m, stream, a, device, what);
      Py_DECREF(m);
    } else {
      if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
      PyErr_Clear();
      PyObject *cai = PyObject_GetAttr(o, s_cai);
      if (cai == NULL) {
        if (!PyErr_ExceptionMatches(PyExc_AttributeError)) return -1;
        PyErr_Clear();
        return 0;
      }
      if (slot != NULL) slot->proto = PROTO_CAI;
      r = from_cai(cai, stream, a, device, what);
      Py_DECREF(cai);
    }
  }
  return r == 0 ? 1 : -1;
}

static void release_arrays(pyarr *a, int n) {
  for (int i = 0; i < n; i++) {
    release_capsule(a[i].hold);
    a[i].hold = NULL;
  }
}

/* ------------------------------------------------------------------ */
/* Scalars                                                            */
/* ------------------------------------------------------------------ */

static void find_numpy(void) {
  if (numpy_generic_type != NULL) return;
  PyObject *m = imported("numpy");
  if (m == NULL) return;
  numpy_generic_type = PyObject_GetAttrString(m, "generic");
  if (numpy_generic_type == NULL) PyErr_Clear();
  Py_DECREF(m);
}

/* A Python value converted to `dtype`, as C would convert it. */
static int value_to_arg(PyObject *v, jitk_dtype dtype, jitk_arg *out, const char *what) {
  switch (dtype) {
    case JITK_BOOL: {
      int t = PyObject_IsTrue(v);
      if (t < 0) return -1;
      *out = jitk_arg_bool(t);
      return 0;
    }
    case JITK_INT8:
    case JITK_INT16:
    case JITK_INT32:
    case JITK_INT64: {
      long long x = PyLong_AsLongLong(v);
      if (x == -1 && PyErr_Occurred()) return -1;
      *out = dtype == JITK_INT8    ? jitk_arg_i8((int8_t)x)
             : dtype == JITK_INT16 ? jitk_arg_i16((int16_t)x)
             : dtype == JITK_INT32 ? jitk_arg_i32((int32_t)x)
                                   : jitk_arg_i64(x);
      return 0;
    }
    case JITK_UINT8:
    case JITK_UINT16:
    case JITK_UINT32:
    case JITK_UINT64: {
      unsigned long long x = PyLong_AsUnsignedLongLong(v);
      if (x == (unsigned long long)-1 && PyErr_Occurred()) return -1;
      *out = dtype == JITK_UINT8    ? jitk_arg_u8((uint8_t)x)
             : dtype == JITK_UINT16 ? jitk_arg_u16((uint16_t)x)
             : dtype == JITK_UINT32 ? jitk_arg_u32((uint32_t)x)
                                    : jitk_arg_u64(x);
      return 0;
    }
    case JITK_FLOAT16:
    case JITK_BFLOAT16:
    case JITK_FLOAT32:
    case JITK_FLOAT64:
    case JITK_FLOAT8_E4M3:
    case JITK_FLOAT8_E5M2: {
      double x = PyFloat_AsDouble(v);
      if (x == -1.0 && PyErr_Occurred()) return -1;
      *out = dtype == JITK_FLOAT16       ? jitk_arg_f16_bits(jitk_float_to_half((float)x))
             : dtype == JITK_FLOAT8_E4M3 ? jitk_arg_f8e4m3_bits(jitk_float_to_float8_e4m3((float)x))
             : dtype == JITK_FLOAT8_E5M2 ? jitk_arg_f8e5m2_bits(jitk_float_to_float8_e5m2((float)x))
             : dtype == JITK_BFLOAT16    ? jitk_arg_bf16_bits(jitk_float_to_bfloat16((float)x))
             : dtype == JITK_FLOAT32     ? jitk_arg_f32((float)x)
                                         : jitk_arg_f64(x);
      return 0;
    }
    case JITK_COMPLEX64:
    case JITK_COMPLEX128: {
      double re = PyComplex_RealAsDouble(v), im = PyComplex_ImagAsDouble(v);
      if (PyErr_Occurred()) return -1;
      *out = dtype == JITK_COMPLEX64 ? jitk_arg_c64((float)re, (float)im) : jitk_arg_c128(re, im);
      return 0;
    }
    default: PyErr_Format(PyExc_TypeError, "%s: jitk has no scalar of that type", what); return -1;
  }
}

/* A scalar argument: Python bool, int (int64; past it, uint64), float
 * (float64) and complex (complex128) as CuPy types them; NumPy scalars
 * keep their dtype; CuPy's texture and surface objects pass their
 * handle (with `handles`). 1: done; 0: not a scalar; -1: an exception. */
static int to_scalar(PyObject *o, jitk_arg *out, const char *what, bool handles) {
  if (PyBool_Check(o)) {
    *out = jitk_arg_bool(o == Py_True);
    return 1;
  }
  if (PyLong_Check(o)) {
    int overflow = 0;
    long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
    if (overflow == 0) {
      if (v == -1 && PyErr_Occurred()) return -1;
      *out = jitk_arg_i64(v);
      return 1;
    }
    unsigned long long u = PyLong_AsUnsignedLongLong(o);
    if (u == (unsigned long long)-1 && PyErr_Occurred()) {
      PyErr_Format(PyExc_OverflowError, "%s: the integer does not fit in 64 bits", what);
      return -1;
    }
    *out = jitk_arg_u64(u);
    return 1;
  }
  if (PyFloat_Check(o)) {
    *out = jitk_arg_f64(PyFloat_AsDouble(o));
    return 1;
  }
  if (PyComplex_Check(o)) {
    *out = jitk_arg_c128(PyComplex_RealAsDouble(o), PyComplex_ImagAsDouble(o));
    return 1;
  }
  if (numpy_generic_type == NULL) find_numpy();
  if (is_instance(o, numpy_generic_type)) {
    /* Each NumPy scalar type has one dtype: remembered per type, so a
     * call does not ask the scalar for it. */
    jitk_dtype d = JITK_DTYPE_NONE;
    PyTypeObject *tp = Py_TYPE(o);
    int slot = 0;
    for (; slot < scalar_type_cache_n; slot++)
      if (scalar_type_cache[slot].type == tp) break;
    if (slot < scalar_type_cache_n) {
      d = scalar_type_cache[slot].dtype;
    } else {
      PyObject *dt = PyObject_GetAttr(o, s_dtype);
      if (dt == NULL) return -1;
      d = dtype_of(dt);
      Py_DECREF(dt);
      if (d != JITK_DTYPE_NONE &&
          scalar_type_cache_n < (int)(sizeof scalar_type_cache / sizeof scalar_type_cache[0])) {
        Py_INCREF(tp);
        scalar_type_cache[scalar_type_cache_n].type = tp;
        scalar_type_cache[scalar_type_cache_n++].dtype = d;
      }
    }
    if (d == JITK_DTYPE_NONE) {
      PyErr_Format(PyExc_TypeError, "%s is a NumPy scalar of a type jitk does not support", what);
      return -1;
    }
    /* Integers and reals are read through their number slots
     * (__index__, __float__), without a call of .item(). */
    if ((d >= JITK_INT8 && d <= JITK_INT64) || (d >= JITK_FLOAT16 && d <= JITK_FLOAT64) ||
        d == JITK_FLOAT8_E4M3 || d == JITK_FLOAT8_E5M2)
      return value_to_arg(o, d, out, what) == 0 ? 1 : -1;
    PyObject *v = PyObject_CallMethodObjArgs(o, s_item, NULL);
    if (v == NULL) return -1;
    int r = value_to_arg(v, d, out, what);
    Py_DECREF(v);
    return r == 0 ? 1 : -1;
  }
  /* cupy.cuda.texture.TextureObject / SurfaceObject: a 64-bit handle
   * (looked for only once the array protocols found nothing). */
  if (!handles) return 0;
  char tn[128];
  type_name(o, tn, sizeof tn);
  if (strstr(tn, "TextureObject") || strstr(tn, "SurfaceObject")) {
    PyObject *p = PyObject_GetAttr(o, s_ptr);
    if (p == NULL) return -1;
    unsigned long long h = PyLong_AsUnsignedLongLong(p);
    Py_DECREF(p);
    if (h == (unsigned long long)-1 && PyErr_Occurred()) return -1;
    *out = jitk_arg_u64(h);
    return 1;
  }
  return 0;
}

/* ------------------------------------------------------------------ */
/* A call's arguments                                                 */
/* ------------------------------------------------------------------ */

typedef struct call {
  int n;
  jitk_arg args[MAX_ARGS];
  pyarr arrs[MAX_ARGS];
  int narr;
  int lib;    /* the library of the first CuPy or PyTorch array */
  int device; /* the arrays' device, -1 before the first */
  bool mixed; /* arrays of more than one device (pick_device decides) */
  jitk_stream stream;
  bool stream_given;
  bool pointer_only; /* arrays are passed as their address (raw kernels) */
} call;

static void call_release(call *c) { release_arrays(c->arrs, c->narr); }

/* A call of n arguments, on `stream` (stream=: None or NULL for the
 * default, decided once the arrays are read). On a bad stream -1, with
 * nothing to release yet. */
static int call_init(call *c, int n, PyObject *stream, bool pointer_only) {
  c->n = n;
  c->narr = 0;
  c->lib = LIB_OTHER;
  c->device = -1;
  c->mixed = false;
  c->stream = NULL;
  c->stream_given = stream != NULL && stream != Py_None;
  c->pointer_only = pointer_only;
  return c->stream_given ? stream_from_object(stream, &c->stream) : 0;
}

/* "KERNEL: argument I", for messages. It is built for every argument of
 * every call (the converters take it ready-made), so without snprintf,
 * which costs as much as reading an array's attributes. */
static void arg_label(char *buf, size_t size, const char *kernel, int i) {
  static const char mid[] = ": argument ";
  size_t n = strlen(kernel);
  if (n + sizeof mid + 12 > size) n = size - sizeof mid - 12;
  memcpy(buf, kernel, n);
  memcpy(buf + n, mid, sizeof mid - 1);
  n += sizeof mid - 1;
  char digits[12];
  int d = 0;
  unsigned v = i < 0 ? 0u : (unsigned)i;
  do {
    digits[d++] = (char)('0' + v % 10);
    v /= 10;
  } while (v != 0);
  while (d > 0) buf[n++] = digits[--d];
  buf[n] = '\0';
}

/* One argument: an array (of any library), a scalar, or (for an output)
 * None, which asks jitk to allocate it. */
static int convert_arg(call *c, PyObject *o, int i, bool output, const char *kernel) {
  char what[160];
  arg_label(what, sizeof what, kernel, i);
  if (o == Py_None && output) {
    c->args[i] = jitk_arg_allocate();
    return 0;
  }
  int lib = lib_of(o);
  if (c->narr >= MAX_ARGS) {
    PyErr_SetString(PyExc_ValueError, "too many array arguments");
    return -1;
  }
  int r;
  if (lib == LIB_OTHER) {
    /* Scalars first: asking a scalar for __dlpack__ and
     * __cuda_array_interface__ raises two AttributeErrors, which cost more
     * than the whole launch. */
    r = to_scalar(o, &c->args[i], what, false);
    if (r != 0) return r == 1 ? 0 : -1;
  }
  pyarr *a = &c->arrs[c->narr];
  int dev = -1;
  r = read_array(o, lib, c->stream_given ? c->stream : NULL, a, &dev, c->pointer_only, what);
  if (r < 0) {
    /* What read_array holds (a capsule) goes with the call. */
    c->narr++;
    return -1;
  }
  if (r == 1) {
    c->narr++;
    if (output && a->not_writable != NULL) {
      PyErr_Format(PyExc_ValueError, "%s is an output, but the array is %s", what, a->not_writable);
      return -1;
    }
    /* An empty array of no device (dev -1) takes the call's. */
    if (dev >= 0 && c->device < 0)
      c->device = dev;
    else if (dev >= 0 && dev != c->device)
      c->mixed = true;
    if (c->lib == LIB_OTHER) c->lib = lib;
    c->args[i] = jitk_arg_array(&a->t);
    return 0;
  }
  r = to_scalar(o, &c->args[i], what, true);
  if (r == 1) return 0;
  if (r < 0) return -1;
  char tn[128];
  type_name(o, tn, sizeof tn);
  PyErr_Format(PyExc_TypeError,
               "Unsupported type %s (%s): jitk takes GPU arrays (CuPy, PyTorch, or anything with "
               "__dlpack__ or __cuda_array_interface__) and Python or NumPy scalars",
               tn, what);
  return -1;
}

/* The device when no argument is an array: the current one of CuPy, else
 * of PyTorch, else 0. */
static int current_device(int lib) {
  if ((lib == LIB_CUPY || lib == LIB_OTHER) && cupy_device_type != NULL) {
    PyObject *d = PyObject_CallNoArgs(cupy_device_type);
    PyObject *id = d ? PyObject_GetAttrString(d, "id") : NULL;
    Py_XDECREF(d);
    int r = id ? (int)PyLong_AsLong(id) : 0;
    Py_XDECREF(id);
    PyErr_Clear();
    return r;
  }
  PyObject *torch = lib == LIB_TORCH ? imported("torch") : NULL;
  if (torch != NULL) {
    PyObject *f = attr_path(torch, "cuda.current_device");
    PyObject *id = f ? PyObject_CallNoArgs(f) : NULL;
    int r = id ? (int)PyLong_AsLong(id) : 0;
    Py_XDECREF(f);
    Py_XDECREF(id);
    Py_DECREF(torch);
    PyErr_Clear();
    return r;
  }
  return 0;
}

/* Empty arrays of no device (from_cai) are on the call's. */
static void settle_empty(call *c) {
  for (int i = 0; i < c->narr; i++)
    if (c->arrs[i].t.device.device_id < 0) c->arrs[i].t.device.device_id = c->device;
}

/* The device a call runs on: its arrays' device; with no arrays, or with
 * arrays of several devices, the current one, as CuPy decides. The arrays
 * of other devices are then read through peer access, enabled on first
 * need with a PerformanceWarning, as CuPy enables it; devices that cannot
 * reach each other give CuPy's ValueError. 0, or -1 with an exception. */
static int pick_device(call *c) {
  if (c->device >= 0 && !c->mixed) {
    settle_empty(c);
    return 0;
  }
  find_cupy();
  c->device = current_device(c->lib);
  settle_empty(c);
  if (!c->mixed) return 0;
  jitk_engine *e = device_engine(c->device);
  if (e == NULL) return -1;
  for (int i = 0; i < c->narr; i++) {
    const DLTensor *t = &c->arrs[i].t;
    int dev = (int)t->device.device_id;
    if (t->device.device_type == kDLCUDAHost || dev == c->device ||
        (dev >= 0 && dev < MAX_DEVICES && (peers_on[c->device] >> dev & 1)))
      continue;
    jitk_status st;
    Py_BEGIN_ALLOW_THREADS st = jitk_engine_enable_peer_access(e, dev);
    Py_END_ALLOW_THREADS if (st == JITK_ERR_UNSUPPORTED || st == JITK_ERR_NO_DEVICE) {
      PyErr_Format(PyExc_ValueError,
                   "The device where the array resides (%d) is different from the current device "
                   "(%d). Peer access is unavailable between these devices.",
                   dev, c->device);
      return -1;
    }
    if (st != JITK_OK) return raise_status(e, st, NULL) ? 0 : -1;
    peers_on[c->device] |= (uint64_t)1 << dev; /* jitk takes peers 0 to 63 only */
    if (PyErr_WarnFormat(PerformanceWarning, 1,
                         "The device where the array resides (%d) is different from the current "
                         "device (%d). Peer access has been activated automatically.",
                         dev, c->device) != 0)
      return -1;
  }
  return 0;
}

static int finish_stream(call *c) {
  if (c->stream_given) return 0;
  if (default_stream(c->lib, c->device, &c->stream) != 0) return -1;
  /* A launch on a stream other than the legacy default one (a CuPy or
   * PyTorch stream of its own, non-blocking or per-thread) is not ordered
   * after it: where an array read through __dlpack__ had its producer
   * order its work before that stream, the stream is waited for. */
  if (c->stream == NULL || c->stream == (jitk_stream)(uintptr_t)1) return 0;
  for (int i = 0; i < c->narr; i++) {
    if (!c->arrs[i].legacy) continue;
    jitk_engine *e = device_engine(c->device);
    if (e == NULL) return -1;
    jitk_status st;
    Py_BEGIN_ALLOW_THREADS st = jitk_stream_synchronize(e, NULL);
    Py_END_ALLOW_THREADS if (st != JITK_OK) return raise_status(e, st, NULL) ? 0 : -1;
    return 0;
  }
  return 0;
}

static PyObject *shape_tuple(const jitk_output_spec *sp) {
  PyObject *t = PyTuple_New(sp->ndim);
  if (t == NULL) return NULL;
  for (int d = 0; d < sp->ndim; d++) {
    PyObject *v = PyLong_FromLongLong(sp->shape[d]);
    if (v == NULL) {
      Py_DECREF(t);
      return NULL;
    }
    PyTuple_SetItem(t, d, v);
  }
  return t;
}

/* An output of `sp`'s dtype and shape, from the library the inputs came
 * from, so that memory pools and streams agree: CuPy's pool for CuPy
 * arrays, PyTorch's caching allocator for tensors. */
static PyObject *allocate_output(int lib, int device, const jitk_output_spec *sp) {
  if (lib == LIB_OTHER) {
    /* Arrays of other libraries, or none: CuPy's, as CuPy would, else
     * PyTorch's. */
    find_cupy();
    if (cupy_ndarray_type != NULL) {
      lib = LIB_CUPY;
    } else {
      find_torch();
      if (torch_empty != NULL) lib = LIB_TORCH;
    }
  }
  PyObject *shape = shape_tuple(sp);
  if (shape == NULL) return NULL;
  PyObject *r = NULL;
  if (lib == LIB_CUPY && cupy_ndarray_type != NULL) {
    /* cupy.ndarray(shape, dtype), which is all cupy.empty does, without
     * its Python frame; the NumPy dtype is made once per dtype, as a
     * dtype's name would be parsed again on every call. */
    PyObject *dt = numpy_dtypes[sp->dtype];
    if (dt == NULL) {
      PyObject *np = imported("numpy");
      PyObject *make = np ? PyObject_GetAttrString(np, "dtype") : NULL;
      dt = make ? PyObject_CallFunction(make, "s", dtype_name(sp->dtype)) : NULL;
      Py_XDECREF(make);
      Py_XDECREF(np);
      if (dt == NULL) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_RuntimeError, "NumPy is not imported");
        Py_DECREF(shape);
        return NULL;
      }
      numpy_dtypes[sp->dtype] = dt;
    }
    PyObject *args = PyTuple_Pack(2, shape, dt);
    /* CuPy allocates on its current device: where that is not the
     * inputs', theirs is made current for the allocation. Without
     * runtime.getDevice (an older CuPy) the current device is taken to be
     * 0, as before it was asked. */
    int current = 0;
    if (cupy_get_device != NULL) {
      PyObject *c = PyObject_CallNoArgs(cupy_get_device);
      current = c != NULL ? (int)PyLong_AsLong(c) : -1;
      Py_XDECREF(c);
      if (current == -1 && PyErr_Occurred()) {
        Py_XDECREF(args);
        Py_DECREF(shape);
        return NULL;
      }
    }
    PyObject *dev = NULL, *enter = NULL;
    if (device != current && cupy_device_type != NULL) {
      dev = PyObject_CallFunction(cupy_device_type, "i", device);
      enter = dev ? PyObject_CallMethod(dev, "__enter__", NULL) : NULL;
    } else if (device != current) {
      PyErr_Format(PyExc_RuntimeError,
                   "this CuPy has no cupy.cuda.Device to allocate an output on device %d", device);
    }
    if (device == current || enter != NULL)
      r = args ? PyObject_Call(cupy_ndarray_type, args, NULL) : NULL;
    if (enter != NULL) {
      /* The device is put back even when the allocation failed; a failure
       * to put it back is the call's. */
      PyObject *ex = PyObject_CallMethod(dev, "__exit__", "OOO", Py_None, Py_None, Py_None);
      if (ex == NULL) Py_CLEAR(r);
      Py_XDECREF(ex);
    }
    Py_XDECREF(enter);
    Py_XDECREF(dev);
    Py_XDECREF(args);
  } else if (lib == LIB_TORCH && torch_empty != NULL) {
    PyObject *tdt = torch_dtypes[sp->dtype];
    if (tdt == NULL) {
      PyErr_Format(PyExc_TypeError, "this PyTorch has no %s tensors", dtype_name(sp->dtype));
    } else {
      /* torch.device objects and the keyword dicts are made once per
       * device. */
      bool cached = device >= 0 && device < MAX_DEVICES;
      PyObject *kw = cached ? torch_empty_kw[sp->dtype][device] : NULL;
      if (kw != NULL) {
        Py_INCREF(kw);
      } else {
        PyObject *dev = cached ? torch_devices[device] : NULL;
        if (dev == NULL) {
          dev = PyObject_CallFunction(torch_device_fn, "si", "cuda", device);
          if (dev != NULL && cached) torch_devices[device] = Py_NewRef(dev);
        } else {
          Py_INCREF(dev);
        }
        kw = dev ? Py_BuildValue("{s:O,s:O}", "dtype", tdt, "device", dev) : NULL;
        Py_XDECREF(dev);
        if (kw != NULL && cached) torch_empty_kw[sp->dtype][device] = Py_NewRef(kw);
      }
      PyObject *args = PyTuple_Pack(1, shape);
      r = kw && args ? PyObject_Call(torch_empty, args, kw) : NULL;
      Py_XDECREF(kw);
      Py_XDECREF(args);
    }
  } else {
    PyErr_SetString(PyExc_TypeError,
                    "jitk allocates outputs with the inputs' array library (CuPy or PyTorch), "
                    "and neither is imported; pass the outputs");
  }
  Py_DECREF(shape);
  return r;
}

/* Allocates the outputs the call lacks, given their specs, and adds them
 * to the call as arrays; out[j] gets each output object (new or given). */
/* An output jitk just allocated with CuPy or PyTorch: its layout is the
 * spec's, C-contiguous on `device`, so only its address is read (the
 * shape and strides tuples and the dtype are not asked for). 1: done; 0:
 * not of those libraries; -1: an exception. */
static int allocated_array(PyObject *o, int device, const jitk_output_spec *sp, pyarr *a) {
  int lib = lib_of(o);
  if (lib != LIB_CUPY && lib != LIB_TORCH) return 0;
  memset(&a->t, 0, sizeof a->t);
  a->hold = NULL;
  if (lib == LIB_CUPY) {
    if (cupy_pointer(o, cupy_exact(o), &a->t.data, NULL) != 0) return -1;
  } else {
    PyObject *ptr = PyObject_CallMethodObjArgs(o, s_data_ptr, NULL);
    if (ptr == NULL) return -1;
    a->t.data = PyLong_AsVoidPtr(ptr);
    Py_DECREF(ptr);
    if (PyErr_Occurred()) return -1;
  }
  a->dtype = sp->dtype;
  for (int d = 0; d < sp->ndim; d++) a->shape[d] = sp->shape[d];
  c_strides(a, sp->ndim);
  set_tensor_layout(a, sp->ndim);
  a->t.device.device_type = kDLCUDA;
  a->t.device.device_id = device;
  return 1;
}

static int allocate_outputs(call *c, int nin, int nout, const jitk_output_spec *specs,
                            PyObject *args, PyObject **out) {
  for (int j = 0; j < nout; j++) {
    int p = nin + j;
    bool given = p < PyTuple_Size(args) && c->args[p].kind != JITK_ARG_ALLOCATE;
    if (given) {
      out[j] = PyTuple_GetItem(args, p);
      Py_INCREF(out[j]);
      continue;
    }
    int device = c->device < 0 ? 0 : c->device;
    PyObject *o = allocate_output(c->lib, device, &specs[j]);
    if (o == NULL) return -1;
    out[j] = o;
    int dev = -1;
    pyarr *a = &c->arrs[c->narr];
    int r = allocated_array(o, device, &specs[j], a);
    if (r == 0) r = read_array(o, lib_of(o), c->stream, a, &dev, false, "an allocated output");
    c->narr++;
    if (r != 1) {
      if (r == 0) PyErr_SetString(JitkError, "an allocated output is not an array");
      return -1;
    }
    c->args[p] = jitk_arg_array(&a->t);
  }
  return 0;
}

static PyObject *pack_outputs(PyObject **out, int nout, bool no_return, bool return_tuple) {
  if (no_return) {
    for (int j = 0; j < nout; j++) Py_DECREF(out[j]);
    Py_RETURN_NONE;
  }
  if (nout == 1 && !return_tuple) return out[0];
  PyObject *t = PyTuple_New(nout);
  if (t == NULL) {
    for (int j = 0; j < nout; j++) Py_DECREF(out[j]);
    return NULL;
  }
  for (int j = 0; j < nout; j++) PyTuple_SetItem(t, j, out[j]);
  return t;
}

/* The UTF-8 text of str `o` for the C library, which reads a string up
 * to its first NUL: a str that cannot be encoded (a lone surrogate) or
 * that holds a NUL, which would cut it short without a word, raises
 * ValueError naming `what`. */
static const char *c_text(PyObject *o, const char *what) {
  if (!PyUnicode_Check(o)) {
    char tn[128];
    type_name(o, tn, sizeof tn);
    PyErr_Format(PyExc_TypeError, "%s must be a str, not %s", what, tn);
    return NULL;
  }
  Py_ssize_t n = 0;
  const char *t = PyUnicode_AsUTF8AndSize(o, &n);
  if (t == NULL) {
    PyObject *type, *value, *tb;
    PyErr_Fetch(&type, &value, &tb);
    PyErr_NormalizeException(&type, &value, &tb);
    PyErr_Format(PyExc_ValueError, "%s cannot be encoded as UTF-8: %S", what,
                 value ? value : Py_None);
    Py_XDECREF(type);
    Py_XDECREF(value);
    Py_XDECREF(tb);
    return NULL;
  }
  if ((size_t)n != strlen(t)) {
    PyErr_Format(PyExc_ValueError, "%s contains a NUL character", what);
    return NULL;
  }
  return t;
}

/* A tuple of str (CuPy's options) as a C array of the strings, which live
 * as long as the tuple. */
static int string_list(PyObject *seq, const char ***out, size_t *n, const char *what) {
  *out = NULL;
  *n = 0;
  if (seq == NULL || seq == Py_None) return 0;
  PyObject *fast = PySequence_Tuple(seq);
  if (fast == NULL) return -1;
  Py_ssize_t len = PyTuple_Size(fast);
  const char **v = len > 0 ? PyMem_Calloc((size_t)len, sizeof *v) : NULL;
  if (len > 0 && v == NULL) {
    Py_DECREF(fast);
    PyErr_NoMemory();
    return -1;
  }
  for (Py_ssize_t i = 0; i < len; i++) {
    PyObject *item = PyTuple_GetItem(fast, i);
    if (!PyUnicode_Check(item)) {
      PyErr_Format(PyExc_TypeError, "%s must be strings", what);
      PyMem_Free(v);
      Py_DECREF(fast);
      return -1;
    }
    if ((v[i] = c_text(item, what)) == NULL) {
      PyMem_Free(v);
      Py_DECREF(fast);
      return -1;
    }
  }
  /* The strings belong to the items of `fast`, which the caller's tuple
   * keeps alive; `fast` itself is that tuple or a copy of it. */
  Py_DECREF(fast);
  *out = v;
  *n = (size_t)len;
  return 0;
}

/* ------------------------------------------------------------------ */
/* ElementwiseKernel                                                  */
/* ------------------------------------------------------------------ */

#define MAX_PARAMS 64

/* Each parameter's declared type: a dtype, or a placeholder (numbered in
 * the order they first appear). */
typedef struct param_types {
  jitk_dtype dtype[MAX_PARAMS];
  signed char placeholder[MAX_PARAMS]; /* -1 for a fixed dtype */
} param_types;

/* Records parameter p's type from jitk's description of it. */
static void note_param_type(param_types *pt, int p, const jitk_param_info *info, const char **names,
                            int *num_names) {
  pt->dtype[p] = info->placeholder ? JITK_DTYPE_NONE : info->dtype;
  pt->placeholder[p] = -1;
  if (info->placeholder == NULL) return;
  for (int h = 0; h < *num_names; h++)
    if (strcmp(names[h], info->placeholder) == 0) pt->placeholder[p] = (signed char)h;
  if (pt->placeholder[p] < 0 && *num_names < MAX_PARAMS) {
    names[*num_names] = info->placeholder;
    pt->placeholder[p] = (signed char)(*num_names)++;
  }
}

/* Whether the Python int `v` fits integer dtype `target`. */
static bool int_fits(PyObject *v, jitk_dtype target) {
  int bits = (int)dtype_size(target) * 8;
  int overflow = 0;
  long long x = PyLong_AsLongLongAndOverflow(v, &overflow);
  bool fits;
  if (target <= JITK_INT64)
    fits = overflow == 0 && (bits == 64 || (x >= -(1LL << (bits - 1)) && x < (1LL << (bits - 1))));
  else if (overflow > 0)
    fits =
        bits == 64 && !(PyLong_AsUnsignedLongLong(v) == (unsigned long long)-1 && PyErr_Occurred());
  else
    fits = overflow == 0 && x >= 0 && (bits == 64 || x < (1LL << bits));
  PyErr_Clear();
  return fits;
}

/* A scalar given for an integer parameter (the declared dtype, or the one
 * its placeholder takes: from the first array of it, else from the first
 * scalar of it, as the library binds placeholders) must hold a value of
 * that dtype, as NumPy 2 and CuPy convert values: a Python int or a NumPy
 * integer out of range is an OverflowError (300 for int8, not 44), a
 * float is cut toward zero and then checked so, and NaN is a ValueError
 * and an infinity an OverflowError, with NumPy's words. The library
 * itself converts as C casts do, which would change such values without
 * a word. (CuPy wraps some NumPy scalars into unsigned types, -1 into
 * uint32 as 4294967295; jitk refuses those too.) */
static int check_scalar_ints(const param_types *pt, PyObject *args, const call *c,
                             const char *kernel) {
  Py_ssize_t n = PyTuple_Size(args);
  for (Py_ssize_t i = 0; i < n && i < MAX_PARAMS && i < c->n; i++) {
    PyObject *o = PyTuple_GetItem(args, i);
    const jitk_arg *a = &c->args[i];
    if (a->kind != JITK_ARG_SCALAR || PyBool_Check(o) || a->dtype == JITK_BOOL) continue;
    bool integer = a->dtype >= JITK_INT8 && a->dtype <= JITK_UINT64;
    bool real = (a->dtype >= JITK_FLOAT16 && a->dtype <= JITK_FLOAT64) ||
                a->dtype == JITK_FLOAT8_E4M3 || a->dtype == JITK_FLOAT8_E5M2;
    if (!integer && !real) continue;
    jitk_dtype target = pt->dtype[i];
    for (int pass = 0; pass < 2 && target == JITK_DTYPE_NONE; pass++)
      for (int j = 0; target == JITK_DTYPE_NONE && j < c->n && j < MAX_PARAMS; j++) {
        if (pt->placeholder[j] < 0 || pt->placeholder[j] != pt->placeholder[i]) continue;
        if (pass == 0 && c->args[j].kind == JITK_ARG_ARRAY &&
            jitk_dtype_from_dlpack(c->args[j].tensor->dtype, &target) != JITK_OK)
          target = JITK_DTYPE_NONE;
        else if (pass == 1 && c->args[j].kind == JITK_ARG_SCALAR)
          target = c->args[j].dtype;
      }
    if (target < JITK_INT8 || target > JITK_UINT64 || target == a->dtype) continue;
    PyObject *v;
    if (integer) {
      v = PyNumber_Index(o);
    } else {
      double x = PyFloat_AsDouble(o);
      if (x == -1.0 && PyErr_Occurred()) return -1;
      if (isnan(x)) {
        PyErr_Format(PyExc_ValueError, "%s: cannot convert float NaN to integer", kernel);
        return -1;
      }
      if (isinf(x)) {
        PyErr_Format(PyExc_OverflowError, "%s: cannot convert float infinity to integer", kernel);
        return -1;
      }
      v = PyLong_FromDouble(x);
    }
    if (v == NULL) return -1;
    bool fits = int_fits(v, target);
    if (!fits)
      PyErr_Format(PyExc_OverflowError, "%s: Python integer %S out of bounds for %s", kernel, v,
                   dtype_name(target));
    Py_DECREF(v);
    if (!fits) return -1;
  }
  return 0;
}

typedef struct ew_kernel {
  PyObject_HEAD PyObject *in_params, *out_params, *operation, *name, *preamble, *loop_prep,
      *after_loop;
  PyObject *options;      /* tuple of str */
  PyObject *params;       /* tuple of (name, is_output, is_raw, type) */
  PyObject *cached_codes; /* dict: the specializations compiled, as CuPy keeps them */
  PyObject *c_in, *c_out; /* the parameter lists as the library takes them */
  int nin, nout;
  int reduce_dims, no_return, return_tuple;
  unsigned char raw[MAX_PARAMS];
  param_types types;
  jitk_elementwise *parsed; /* on the parse engine: checks and compile() */
  jitk_elementwise *per_device[MAX_DEVICES];
  /* The argument dtypes of the last call, so _cached_codes is touched only
   * when they change. */
  unsigned char last_sig[MAX_PARAMS];
  bool have_sig;
} ew_kernel;

/* CuPy refuses a kernel name that is not a C identifier with this
 * message at construction; jitk's own parse would say it too, but in its
 * words, and CuPy's users (and tests) look for CuPy's. */
static int check_kernel_name(PyObject *name) {
  Py_ssize_t n = 0;
  const char *s = c_text(name, "the kernel name");
  if (s == NULL) return -1;
  n = (Py_ssize_t)strlen(s);
  bool ok = n > 0 && !(s[0] >= '0' && s[0] <= '9');
  for (Py_ssize_t i = 0; ok && i < n; i++) {
    char c = s[i];
    ok = c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  }
  if (!ok) {
    PyErr_Format(PyExc_ValueError, "Invalid kernel name: '%U' is not a C identifier", name);
    return -1;
  }
  return 0;
}

/* options= of the kernel classes as the tuple they keep: None gives (),
 * and anything else must be a sequence of str. A bare str is refused, not
 * taken as a sequence of one-letter options, and a non-str item fails
 * here rather than at the first compile. */
static PyObject *options_tuple(PyObject *options) {
  if (options == NULL || options == Py_None) return PyTuple_New(0);
  if (PyUnicode_Check(options) || PyBytes_Check(options)) {
    PyErr_Format(PyExc_TypeError, "options must be a sequence of str, not a %s",
                 PyUnicode_Check(options) ? "str" : "bytes");
    return NULL;
  }
  PyObject *t = PySequence_Tuple(options);
  if (t == NULL) return NULL;
  for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
    if (!PyUnicode_Check(PyTuple_GetItem(t, i))) {
      PyErr_Format(PyExc_TypeError, "options must be a sequence of str; item %zd is not a str", i);
      Py_DECREF(t);
      return NULL;
    }
  }
  return t;
}

/* The NVRTC options of a kernel of CuPy's classes: the user's, then
 * -ftz=true, which CuPy adds to every compile of its own. float32
 * subnormals then flush to zero as under CuPy, and results agree with
 * CuPy's bit for bit. Where the user's options set -ftz themselves, NVRTC
 * is not given a second, contrary one. */
static int compile_options(PyObject *seq, const char ***out, size_t *n) {
  if (string_list(seq, out, n, "options") != 0) return -1;
  for (size_t i = 0; i < *n; i++)
    if (strncmp((*out)[i], "-ftz", 4) == 0 || strncmp((*out)[i], "--ftz", 5) == 0) return 0;
  const char **v = PyMem_Realloc(*out, (*n + 1) * sizeof *v);
  if (v == NULL) {
    PyMem_Free(*out);
    *out = NULL;
    PyErr_NoMemory();
    return -1;
  }
  v[(*n)++] = "-ftz=true";
  *out = v;
  return 0;
}

/* NumPy's names of jitk's dtypes that CuPy's users write as parameter
 * types, known without NumPy (a PyTorch-only process reads them the
 * same): the type codes, the C-like names, and the aliases NumPy 2 keeps
 * (int_ and long are int64 on the Linux machines jitk runs on). */
static const struct {
  const char *name;
  jitk_dtype dtype;
} numpy_aliases[] = {
    {"b1", JITK_BOOL},           {"bool_", JITK_BOOL},     {"i1", JITK_INT8},
    {"byte", JITK_INT8},         {"i2", JITK_INT16},       {"short", JITK_INT16},
    {"i4", JITK_INT32},          {"intc", JITK_INT32},     {"i8", JITK_INT64},
    {"int", JITK_INT64},         {"int_", JITK_INT64},     {"long", JITK_INT64},
    {"longlong", JITK_INT64},    {"intp", JITK_INT64},     {"u1", JITK_UINT8},
    {"ubyte", JITK_UINT8},       {"u2", JITK_UINT16},      {"ushort", JITK_UINT16},
    {"u4", JITK_UINT32},         {"uintc", JITK_UINT32},   {"u8", JITK_UINT64},
    {"uint", JITK_UINT64},       {"ulong", JITK_UINT64},   {"ulonglong", JITK_UINT64},
    {"uintp", JITK_UINT64},      {"f2", JITK_FLOAT16},     {"half", JITK_FLOAT16},
    {"f4", JITK_FLOAT32},        {"single", JITK_FLOAT32}, {"f8", JITK_FLOAT64},
    {"float", JITK_FLOAT64},     {"double", JITK_FLOAT64}, {"c8", JITK_COMPLEX64},
    {"csingle", JITK_COMPLEX64}, {"c16", JITK_COMPLEX128}, {"complex", JITK_COMPLEX128},
    {"cdouble", JITK_COMPLEX128}};

/* The dtype NumPy gives type name `t` (n bytes) of a parameter list, where
 * jitk does not know the name: from the table above, else from
 * numpy.dtype() when NumPy is there; JITK_DTYPE_NONE otherwise. An error
 * set only for a failure other than NumPy's refusal of the name. */
static jitk_dtype numpy_type_name(const char *t, size_t n) {
  for (size_t a = 0; a < sizeof numpy_aliases / sizeof numpy_aliases[0]; a++)
    if (strlen(numpy_aliases[a].name) == n && memcmp(numpy_aliases[a].name, t, n) == 0)
      return numpy_aliases[a].dtype;
  PyObject *m = PyImport_ImportModule("numpy");
  if (m == NULL) {
    PyErr_Clear(); /* no NumPy: the name stays a placeholder */
    return JITK_DTYPE_NONE;
  }
  PyObject *name = PyUnicode_FromStringAndSize(t, (Py_ssize_t)n);
  PyObject *dt = name ? PyObject_CallMethod(m, "dtype", "O", name) : NULL;
  Py_DECREF(m);
  Py_XDECREF(name);
  jitk_dtype d = JITK_DTYPE_NONE;
  if (dt != NULL) {
    d = dtype_of(dt);
    Py_DECREF(dt);
  } else if (PyErr_ExceptionMatches(PyExc_TypeError) || PyErr_ExceptionMatches(PyExc_ValueError)) {
    PyErr_Clear(); /* not a dtype NumPy knows */
  }
  return d;
}

/* A parameter list as CuPy reads it, for the library: CuPy takes a type
 * of one letter for a placeholder and any longer one for a NumPy dtype
 * name ("f4", "single", "int_", "float"), where jitk would take an
 * unknown name for a placeholder, which the arrays then bind whatever
 * their dtype. In each item of the form "TYPE NAME" or "raw TYPE NAME",
 * such a type NumPy knows, and jitk by another name, is replaced by jitk's
 * name, the rest of the text kept as it is (so that the library's other
 * messages quote what the caller wrote); other items are left to the
 * library's own checks. The list itself (a new reference) when nothing
 * changes; NULL with an exception on failure. */
static PyObject *numpy_type_names(PyObject *params) {
  Py_ssize_t len;
  const char *text = PyUnicode_AsUTF8AndSize(params, &len);
  if (text == NULL) return NULL;
  char *out = PyMem_Malloc((size_t)len * 4 + 16);
  if (out == NULL) return PyErr_NoMemory();
  size_t o = 0;
  bool changed = false;
  for (Py_ssize_t at = 0; at <= len;) {
    Py_ssize_t end = at;
    while (end < len && text[end] != ',') end++;
    /* The item's words: where each starts and how long it is. */
    Py_ssize_t ws[4], wl[4];
    int words = 0;
    bool plain = true;
    for (Py_ssize_t i = at; i < end;) {
      if (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r') {
        i++;
        continue;
      }
      Py_ssize_t j = i;
      while (j < end && (isalnum((unsigned char)text[j]) || text[j] == '_')) j++;
      if (j == i || words == 4) {
        plain = false; /* something else than words: the library's to judge */
        break;
      }
      ws[words] = i;
      wl[words++] = j - i;
      i = j;
    }
    int type = -1;
    if (plain && words == 2) type = 0;
    if (plain && words == 3 && wl[0] == 3 && memcmp(text + ws[0], "raw", 3) == 0) type = 1;
    jitk_dtype d = JITK_DTYPE_NONE;
    if (type >= 0 && wl[type] > 1) {
      char word[64];
      jitk_dtype known;
      if (wl[type] < (Py_ssize_t)sizeof word) {
        memcpy(word, text + ws[type], (size_t)wl[type]);
        word[wl[type]] = '\0';
        if (jitk_dtype_from_name(word, &known) != JITK_OK)
          d = numpy_type_name(word, (size_t)wl[type]);
      }
      if (PyErr_Occurred()) {
        PyMem_Free(out);
        return NULL;
      }
    }
    if (d != JITK_DTYPE_NONE) {
      const char *jn = dtype_name(d);
      memcpy(out + o, text + at, (size_t)(ws[type] - at));
      o += (size_t)(ws[type] - at);
      memcpy(out + o, jn, strlen(jn));
      o += strlen(jn);
      memcpy(out + o, text + ws[type] + wl[type], (size_t)(end - ws[type] - wl[type]));
      o += (size_t)(end - ws[type] - wl[type]);
      changed = true;
    } else {
      memcpy(out + o, text + at, (size_t)(end - at));
      o += (size_t)(end - at);
    }
    if (end < len) out[o++] = ',';
    at = end + 1;
  }
  PyObject *r = changed ? PyUnicode_FromStringAndSize(out, (Py_ssize_t)o) : Py_NewRef(params);
  PyMem_Free(out);
  return r;
}

static jitk_status ew_create(ew_kernel *k, jitk_engine *e, jitk_elementwise **out) {
  const char **opts = NULL;
  size_t nopts = 0;
  if (compile_options(k->options, &opts, &nopts) != 0) return JITK_ERR_INVALID_ARGUMENT;
  jitk_elementwise_options o;
  memset(&o, 0, sizeof o);
  o.nvrtc_options = opts;
  o.num_nvrtc_options = nopts;
  const char *in = c_text(k->c_in, "in_params");
  const char *outs = in ? c_text(k->c_out, "out_params") : NULL;
  const char *op = outs ? c_text(k->operation, "operation") : NULL;
  const char *name = op ? c_text(k->name, "name") : NULL;
  o.preamble = name ? c_text(k->preamble, "preamble") : NULL;
  o.loop_prep = o.preamble ? c_text(k->loop_prep, "loop_prep") : NULL;
  o.after_loop = o.loop_prep ? c_text(k->after_loop, "after_loop") : NULL;
  jitk_status st = JITK_ERR_INVALID_ARGUMENT;
  if (o.after_loop != NULL) st = jitk_elementwise_create(e, in, outs, op, name, &o, out);
  PyMem_Free(opts);
  return st;
}

static PyObject *param_tuple(const jitk_param_info *info) {
  return Py_BuildValue("(sNNs)", info->name, PyBool_FromLong(info->is_output),
                       PyBool_FromLong(info->is_raw),
                       info->placeholder ? info->placeholder : dtype_name(info->dtype));
}

/* ElementwiseKernel's keywords: what it is made with (ew_new), and what
 * it pickles as (ew_reduce), in that order. */
static char *ew_keywords[] = {"in_params",   "out_params", "operation", "name",
                              "reduce_dims", "preamble",   "no_return", "return_tuple",
                              "loop_prep",   "after_loop", "options",   NULL};

static PyObject *ew_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  char **kwlist = ew_keywords;
  PyObject *in_p, *out_p, *op, *name = NULL, *preamble = NULL, *loop_prep = NULL,
                               *after_loop = NULL, *options = NULL;
  int reduce_dims = 1, no_return = 0, return_tuple = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UUU|UpUppUUO:ElementwiseKernel", kwlist, &in_p,
                                   &out_p, &op, &name, &reduce_dims, &preamble, &no_return,
                                   &return_tuple, &loop_prep, &after_loop, &options))
    return NULL;
  if (name != NULL && check_kernel_name(name) != 0) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  ew_kernel *k = (ew_kernel *)alloc(type, 0);
  if (k == NULL) return NULL;
  PyObject *empty = PyUnicode_FromString("");
  k->in_params = Py_NewRef(in_p);
  k->out_params = Py_NewRef(out_p);
  k->c_in = numpy_type_names(in_p);
  k->c_out = k->c_in ? numpy_type_names(out_p) : NULL;
  k->operation = Py_NewRef(op);
  k->name = name ? Py_NewRef(name) : PyUnicode_FromString("kernel");
  k->preamble = Py_NewRef(preamble ? preamble : empty);
  k->loop_prep = Py_NewRef(loop_prep ? loop_prep : empty);
  k->after_loop = Py_NewRef(after_loop ? after_loop : empty);
  Py_XDECREF(empty);
  k->options = options_tuple(options);
  k->cached_codes = PyDict_New();
  k->reduce_dims = reduce_dims;
  k->no_return = no_return;
  k->return_tuple = return_tuple;
  if (k->name == NULL || k->options == NULL || k->cached_codes == NULL || k->c_in == NULL ||
      k->c_out == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  /* The lists are parsed now, as CuPy does: a bad list fails at once,
   * without a GPU. */
  jitk_engine *pe = parse_engine();
  if (pe == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  jitk_status st = ew_create(k, pe, &k->parsed);
  if (st != JITK_OK) {
    Py_DECREF(k);
    if (!PyErr_Occurred()) raise_status(pe, st, NULL);
    return NULL;
  }
  jitk_elementwise_num_params(k->parsed, &k->nin, &k->nout);
  if (k->nin + k->nout > MAX_PARAMS) {
    Py_DECREF(k);
    PyErr_Format(PyExc_ValueError, "at most %d parameters", MAX_PARAMS);
    return NULL;
  }
  k->params = PyTuple_New(k->nin + k->nout);
  const char *names[MAX_PARAMS];
  int num_names = 0;
  for (int p = 0; k->params && p < k->nin + k->nout; p++) {
    jitk_param_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    jitk_elementwise_param(k->parsed, p, &info);
    k->raw[p] = (unsigned char)info.is_raw;
    note_param_type(&k->types, p, &info, names, &num_names);
    PyTuple_SetItem(k->params, p, param_tuple(&info));
  }
  if (k->params == NULL || PyErr_Occurred()) {
    Py_DECREF(k);
    return NULL;
  }
  return (PyObject *)k;
}

/* Frees an instance of one of the module's heap types, whose instances
 * hold a reference to their type. */
static void free_instance(PyObject *o) {
  PyTypeObject *tp = Py_TYPE(o);
  freefunc f = (freefunc)PyType_GetSlot(tp, Py_tp_free);
  f(o);
  Py_DECREF(tp);
}

static void ew_dealloc(ew_kernel *k) {
  for (int d = 0; d < MAX_DEVICES; d++) jitk_elementwise_destroy(k->per_device[d]);
  jitk_elementwise_destroy(k->parsed);
  Py_XDECREF(k->in_params);
  Py_XDECREF(k->out_params);
  Py_XDECREF(k->c_in);
  Py_XDECREF(k->c_out);
  Py_XDECREF(k->operation);
  Py_XDECREF(k->name);
  Py_XDECREF(k->preamble);
  Py_XDECREF(k->loop_prep);
  Py_XDECREF(k->after_loop);
  Py_XDECREF(k->options);
  Py_XDECREF(k->params);
  Py_XDECREF(k->cached_codes);
  free_instance((PyObject *)k);
}

/* The kernel on a device's engine, made at its first call there. */
static jitk_elementwise *ew_on(ew_kernel *k, int device) {
  if (!device_in_range(device)) return NULL;
  if (k->per_device[device] != NULL) return k->per_device[device];
  jitk_engine *e = device_engine(device);
  if (e == NULL) return NULL;
  jitk_status st = ew_create(k, e, &k->per_device[device]);
  if (st != JITK_OK) {
    if (!PyErr_Occurred()) raise_status(e, st, NULL);
    return NULL;
  }
  return k->per_device[device];
}

/* Notes a new specialization in _cached_codes (CuPy's tests count them);
 * cheap when the dtypes repeat, as they do in a loop. */
static void note_specialization(PyObject *cached_codes, unsigned char *last_sig, bool *have_sig,
                                const call *c, const char *(*source)(void *), void *src_arg) {
  unsigned char sig[MAX_PARAMS];
  int n = c->n < MAX_PARAMS ? c->n : MAX_PARAMS;
  for (int p = 0; p < n; p++) {
    const jitk_arg *a = &c->args[p];
    /* Every array argument of a call is the tensor of one of its pyarr
     * (their first member), whose dtype was read with it. */
    jitk_dtype d =
        a->kind == JITK_ARG_ARRAY ? ((const pyarr *)(const void *)a->tensor)->dtype : a->dtype;
    sig[p] = (unsigned char)((a->kind == JITK_ARG_ARRAY ? 0 : 64) + d);
  }
  if (*have_sig && memcmp(sig, last_sig, (size_t)n) == 0) return;
  memcpy(last_sig, sig, (size_t)n);
  *have_sig = true;
  PyObject *key = PyBytes_FromStringAndSize((const char *)sig, n);
  if (key == NULL) {
    PyErr_Clear();
    return;
  }
  if (PyDict_GetItemWithError(cached_codes, key) == NULL && !PyErr_Occurred()) {
    const char *src = source(src_arg);
    PyObject *v = PyUnicode_FromString(src ? src : "");
    if (v != NULL) PyDict_SetItem(cached_codes, key, v);
    Py_XDECREF(v);
  }
  PyErr_Clear();
  Py_DECREF(key);
}

static const char *ew_source_of(void *kern) {
  const char *s = NULL;
  if (jitk_elementwise_source((jitk_elementwise *)kern, &s) != JITK_OK) return NULL;
  return s;
}

/* Reads size=, block_size= and stream= (the only keywords a call takes). */
static int call_keywords(PyObject *kw, const char *const *names, PyObject **values, int n,
                         const char *kernel) {
  for (int i = 0; i < n; i++) values[i] = NULL;
  if (kw == NULL) return 0;
  Py_ssize_t pos = 0;
  PyObject *key, *value;
  while (PyDict_Next(kw, &pos, &key, &value)) {
    const char *k = PyUnicode_AsUTF8AndSize(key, NULL);
    int found = -1;
    for (int i = 0; k && i < n; i++)
      if (strcmp(k, names[i]) == 0) found = i;
    if (found < 0) {
      PyErr_Format(PyExc_TypeError, "%s() got an unexpected keyword argument '%s'", kernel,
                   k ? k : "?");
      return -1;
    }
    values[found] = value;
  }
  return 0;
}

/* CAPTURED_FIRST_CALLS. A call made while its stream captures a CUDA
 * graph compiles and loads the specialization it needs, as CuPy's kernels
 * do: CuPy's own graph tests capture the first calls of its functions.
 * The library refuses to compile inside a launch on a capturing stream
 * (JITK_ERR_STREAM_CAPTURE, its C contract), so the call prepares the
 * specialization, which takes no stream, and launches again; the graph
 * then holds the launch alone. The driver allows a module's loading
 * during a capture in its global mode, the strictest (test_gpu_graphs.py
 * checks it on a GPU), which RawKernel relies on as well: it compiles at
 * its first call. */
static PyObject *ew_call(ew_kernel *k, PyObject *args, PyObject *kw) {
  static const char *const names[] = {"size", "block_size", "stream"};
  PyObject *kv[3];
  const char *kname = PyUnicode_AsUTF8AndSize(k->name, NULL);
  if (call_keywords(kw, names, kv, 3, kname) != 0) return NULL;
  Py_ssize_t n = PyTuple_Size(args);
  if (n != k->nin && n != k->nin + k->nout) {
    PyErr_Format(PyExc_TypeError, "Wrong number of arguments for %s", kname);
    return NULL;
  }
  int64_t size = -1;
  if (kv[0] != NULL && kv[0] != Py_None) {
    size = PyLong_AsLongLong(kv[0]);
    if (size == -1 && PyErr_Occurred()) return NULL;
    /* -1 is CuPy's own default: no size given. */
    if (size < -1) {
      PyErr_SetString(PyExc_ValueError, "size must not be negative (or -1, for none)");
      return NULL;
    }
  }
  unsigned int block = 0;
  if (kv[1] != NULL && kv[1] != Py_None) {
    long long b = PyLong_AsLongLong(kv[1]);
    if (b == -1 && PyErr_Occurred()) return NULL;
    if (b <= 0 || b > UINT_MAX) {
      PyErr_Format(PyExc_ValueError, "block_size must be positive and fit 32 bits, not %lld", b);
      return NULL;
    }
    block = (unsigned int)b;
  }
  call c;
  if (call_init(&c, (int)n, kv[2], false) != 0) return NULL;
  PyObject *out[MAX_PARAMS] = {NULL};
  int nalloc = 0;
  PyObject *result = NULL;
  int nonraw = 0;
  for (int i = 0; i < (int)n; i++) {
    if (convert_arg(&c, PyTuple_GetItem(args, i), i, i >= k->nin, kname) != 0) goto fail;
    if (c.args[i].kind == JITK_ARG_ARRAY && !k->raw[i]) nonraw++;
  }
  if (check_scalar_ints(&k->types, args, &c, kname) != 0) goto fail;
  /* CuPy's rules for size=. */
  if (size >= 0 && nonraw > 0) {
    PyErr_SetString(PyExc_ValueError,
                    "Specified 'size' can be used only if all of the ndarray are 'raw'.");
    goto fail;
  }
  if (size < 0 && nonraw == 0) {
    PyErr_SetString(PyExc_ValueError, "Loop size is undecided.");
    goto fail;
  }
  if (pick_device(&c) != 0) goto fail;
  if (finish_stream(&c) != 0) goto fail;
  jitk_elementwise *kern = ew_on(k, c.device);
  if (kern == NULL) goto fail;
  for (int p = (int)n; p < k->nin + k->nout; p++) c.args[p] = jitk_arg_allocate();
  c.n = k->nin + k->nout;
  bool need = false;
  for (int p = k->nin; p < c.n; p++) need |= c.args[p].kind == JITK_ARG_ALLOCATE;
  if (need) {
    jitk_output_spec specs[MAX_PARAMS];
    jitk_status st = jitk_elementwise_outputs(kern, c.args, (size_t)c.n, size, specs);
    if (st != JITK_OK) {
      raise_elementwise(engines[c.device], st);
      goto fail;
    }
    if (allocate_outputs(&c, k->nin, k->nout, specs, args, out) != 0) {
      nalloc = k->nout;
      goto fail;
    }
  } else {
    for (int j = 0; j < k->nout; j++) out[j] = Py_NewRef(PyTuple_GetItem(args, k->nin + j));
  }
  nalloc = k->nout;
  jitk_launch_options lo;
  jitk_launch_options_init(&lo);
  lo.size = size;
  lo.block_size = block;
  jitk_status st;
  Py_BEGIN_ALLOW_THREADS st =
      jitk_elementwise_launch_ex(kern, c.stream, c.args, (size_t)c.n, &lo, NULL);
  /* See CAPTURED_FIRST_CALLS. */
  if (st == JITK_ERR_STREAM_CAPTURE) {
    st = jitk_elementwise_prepare(kern, c.args, (size_t)c.n, size);
    if (st == JITK_OK)
      st = jitk_elementwise_launch_ex(kern, c.stream, c.args, (size_t)c.n, &lo, NULL);
  }
  Py_END_ALLOW_THREADS if (st != JITK_OK) {
    raise_elementwise(engines[c.device], st);
    annotate_compile_error(ew_source_of(kern), k->options, k->name);
    goto fail;
  }
  note_specialization(k->cached_codes, k->last_sig, &k->have_sig, &c, ew_source_of, kern);
  call_release(&c);
  return pack_outputs(out, k->nout, k->no_return, k->return_tuple);
fail:
  for (int j = 0; j < nalloc; j++) Py_XDECREF(out[j]);
  call_release(&c);
  return result;
}

/* k.compile(types, *, arch=None, ndim=1, index_bits=32): the source of a
 * specialization, compiled without arrays or a GPU. */
static PyObject *ew_compile(ew_kernel *k, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"types", "arch", "ndim", "index_bits", NULL};
  const char *types, *arch = NULL;
  int ndim = 1, bits = 32;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$zii:compile", kwlist, &types, &arch, &ndim, &bits))
    return NULL;
  jitk_engine *e = arch_engine_for(arch);
  if (e == NULL) return NULL;
  jitk_elementwise *kern = NULL;
  jitk_status st = ew_create(k, e, &kern);
  if (st != JITK_OK) return PyErr_Occurred() ? NULL : raise_status(e, st, NULL);
  jitk_elementwise_layout layout;
  memset(&layout, 0, sizeof layout);
  layout.ndim = ndim;
  layout.index_bits = bits;
  const char *src = NULL;
  Py_BEGIN_ALLOW_THREADS st = jitk_elementwise_compile(kern, types, &layout, &src, NULL);
  Py_END_ALLOW_THREADS PyObject *r = NULL;
  if (st == JITK_OK) {
    r = PyUnicode_FromString(src);
  } else {
    raise_status(e, st, NULL);
    annotate_compile_error(ew_source_of(kern), k->options, k->name);
  }
  jitk_elementwise_destroy(kern);
  return r;
}

#include <structmember.h>

static PyMemberDef ew_members[] = {
    {"name", T_OBJECT_EX, offsetof(ew_kernel, name), READONLY, "the kernel's name"},
    {"in_params", T_OBJECT_EX, offsetof(ew_kernel, in_params), READONLY, NULL},
    {"out_params", T_OBJECT_EX, offsetof(ew_kernel, out_params), READONLY, NULL},
    {"operation", T_OBJECT_EX, offsetof(ew_kernel, operation), READONLY, NULL},
    {"preamble", T_OBJECT_EX, offsetof(ew_kernel, preamble), READONLY, NULL},
    {"loop_prep", T_OBJECT_EX, offsetof(ew_kernel, loop_prep), READONLY, NULL},
    {"after_loop", T_OBJECT_EX, offsetof(ew_kernel, after_loop), READONLY, NULL},
    {"options", T_OBJECT_EX, offsetof(ew_kernel, options), READONLY, NULL},
    {"params", T_OBJECT_EX, offsetof(ew_kernel, params), READONLY,
     "(name, is_output, is_raw, type) of each parameter"},
    {"nin", T_INT, offsetof(ew_kernel, nin), READONLY, NULL},
    {"nout", T_INT, offsetof(ew_kernel, nout), READONLY, NULL},
    {"reduce_dims", T_INT, offsetof(ew_kernel, reduce_dims), READONLY, NULL},
    {"no_return", T_INT, offsetof(ew_kernel, no_return), READONLY, NULL},
    {"return_tuple", T_INT, offsetof(ew_kernel, return_tuple), READONLY, NULL},
    {"_cached_codes", T_OBJECT_EX, offsetof(ew_kernel, cached_codes), READONLY,
     "the specializations compiled so far, by argument dtypes"},
    {NULL, 0, 0, 0, NULL}};

static PyObject *ew_nargs(ew_kernel *k, void *unused) {
  (void)unused;
  return PyLong_FromLong(k->nin + k->nout);
}

static PyGetSetDef ew_getset[] = {{"nargs", (getter)ew_nargs, NULL, NULL, NULL},
                                  {NULL, NULL, NULL, NULL, NULL}};

/* __reduce__: see "Pickling". */
static PyObject *ew_reduce(ew_kernel *k, PyObject *unused) {
  (void)unused;
  PyObject *values[] = {k->in_params,
                        k->out_params,
                        k->operation,
                        k->name,
                        py_bool(k->reduce_dims),
                        k->preamble,
                        py_bool(k->no_return),
                        py_bool(k->return_tuple),
                        k->loop_prep,
                        k->after_loop,
                        k->options};
  return reduce_to((PyObject *)k, ew_keywords, values, 11);
}

static PyMethodDef ew_methods[] = {
    {"__reduce__", (PyCFunction)ew_reduce, METH_NOARGS,
     "pickles as the arguments the kernel was made with"},
    {"compile", (PyCFunction)(void (*)(void))ew_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(types, *, arch=None, ndim=1, index_bits=32) -> str\n\nGenerates and compiles the "
     "specialization for `types` ('T=float32') without arrays or a GPU, and returns its CUDA "
     "source; raises jitk.CompileError when NVRTC refuses it."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot ew_slots[] = {
    {Py_tp_new, ew_new},
    {Py_tp_dealloc, ew_dealloc},
    {Py_tp_call, ew_call},
    {Py_tp_members, ew_members},
    {Py_tp_getset, ew_getset},
    {Py_tp_methods, ew_methods},
    {Py_tp_doc,
     "ElementwiseKernel(in_params, out_params, operation, name='kernel', "
     "reduce_dims=True, preamble='', no_return=False, return_tuple=False, "
     "loop_prep='', after_loop='', options=())\n\n"
     "A kernel written as CuPy's ElementwiseKernel, run on GPU arrays of any "
     "library: k(*args, size=None, block_size=None, stream=None)."},
    {0, NULL}};

static PyType_Spec ew_spec = {"jitk.ElementwiseKernel", sizeof(ew_kernel), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, ew_slots};

/* ------------------------------------------------------------------ */
/* ReductionKernel                                                    */
/* ------------------------------------------------------------------ */

typedef struct red_kernel {
  PyObject_HEAD PyObject *in_params, *out_params, *map_expr, *reduce_expr, *post_map_expr,
      *identity, *name, *reduce_type, *preamble, *options, *params, *cached_codes;
  PyObject *c_in, *c_out; /* the parameter lists as the library takes them */
  int nin, nout, reduce_dims;
  param_types types;
  jitk_reduction *parsed;
  jitk_reduction *per_device[MAX_DEVICES];
  unsigned char last_sig[MAX_PARAMS];
  bool have_sig;
} red_kernel;

/* An optional str argument's text; NULL for None, and NULL with an
 * exception set (*failed) for a text the library cannot take. */
static const char *opt_str(PyObject *o, const char *what, bool *failed) {
  if (*failed || o == NULL || o == Py_None) return NULL;
  const char *t = c_text(o, what);
  if (t == NULL) *failed = true;
  return t;
}

static jitk_status red_create(red_kernel *k, jitk_engine *e, jitk_reduction **out) {
  const char **opts = NULL;
  size_t nopts = 0;
  if (compile_options(k->options, &opts, &nopts) != 0) return JITK_ERR_INVALID_ARGUMENT;
  jitk_reduction_options o;
  memset(&o, 0, sizeof o);
  o.nvrtc_options = opts;
  o.num_nvrtc_options = nopts;
  bool failed = false;
  const char *in = opt_str(k->c_in, "in_params", &failed);
  const char *outs = opt_str(k->c_out, "out_params", &failed);
  const char *map = opt_str(k->map_expr, "map_expr", &failed);
  const char *reduce = opt_str(k->reduce_expr, "reduce_expr", &failed);
  const char *post = opt_str(k->post_map_expr, "post_map_expr", &failed);
  const char *identity = opt_str(k->identity, "identity", &failed);
  const char *rtype = opt_str(k->reduce_type, "reduce_type", &failed);
  const char *name = opt_str(k->name, "name", &failed);
  o.preamble = opt_str(k->preamble, "preamble", &failed);
  jitk_status st = JITK_ERR_INVALID_ARGUMENT;
  if (!failed)
    st = jitk_reduction_create(e, in, outs, map, reduce, post, identity, rtype, name, &o, out);
  PyMem_Free(opts);
  return st;
}

/* ReductionKernel's keywords, for red_new and red_reduce, in that order. */
static char *red_keywords[] = {"in_params",     "out_params", "map_expr", "reduce_expr",
                               "post_map_expr", "identity",   "name",     "reduce_type",
                               "reduce_dims",   "preamble",   "options",  NULL};

static PyObject *red_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  char **kwlist = red_keywords;
  PyObject *in_p, *out_p, *map_e, *red_e, *post_e, *ident, *name = NULL, *rtype = NULL,
                                                           *preamble = NULL, *options = NULL;
  int reduce_dims = 1;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UUUUUO|UOpUO:ReductionKernel", kwlist, &in_p, &out_p,
                                   &map_e, &red_e, &post_e, &ident, &name, &rtype, &reduce_dims,
                                   &preamble, &options))
    return NULL;
  if (name != NULL && check_kernel_name(name) != 0) return NULL;
  /* As CuPy: any identity is taken as its str() (0 as "0"), and "" means
   * none, as None does. */
  ident = ident == Py_None ? Py_NewRef(ident) : PyObject_Str(ident);
  if (ident == NULL) return NULL;
  if (PyUnicode_Check(ident) && PyUnicode_GetLength(ident) == 0) {
    Py_DECREF(ident);
    ident = Py_NewRef(Py_None);
  }
  if (rtype != NULL && rtype != Py_None && !PyUnicode_Check(rtype)) {
    /* CuPy takes a NumPy dtype too: its name is the type. */
    PyObject *n = PyObject_GetAttr(rtype, s_name);
    if (n == NULL || !PyUnicode_Check(n)) {
      Py_XDECREF(n);
      Py_DECREF(ident);
      PyErr_SetString(PyExc_TypeError, "reduce_type must be a str, a dtype or None");
      return NULL;
    }
    rtype = n;
  } else if (rtype != NULL) {
    Py_INCREF(rtype);
  }
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  red_kernel *k = (red_kernel *)alloc(type, 0);
  if (k == NULL) {
    Py_XDECREF(rtype);
    Py_DECREF(ident);
    return NULL;
  }
  k->in_params = Py_NewRef(in_p);
  k->out_params = Py_NewRef(out_p);
  k->c_in = numpy_type_names(in_p);
  k->c_out = k->c_in ? numpy_type_names(out_p) : NULL;
  k->map_expr = Py_NewRef(map_e);
  k->reduce_expr = Py_NewRef(red_e);
  k->post_map_expr = Py_NewRef(post_e);
  k->identity = ident;
  k->name = name ? Py_NewRef(name) : PyUnicode_FromString("reduce_kernel");
  k->reduce_type = rtype ? rtype : Py_NewRef(Py_None);
  k->preamble = preamble ? Py_NewRef(preamble) : PyUnicode_FromString("");
  k->options = options_tuple(options);
  k->cached_codes = PyDict_New();
  k->reduce_dims = reduce_dims;
  if (k->name == NULL || k->preamble == NULL || k->options == NULL || k->cached_codes == NULL ||
      k->c_in == NULL || k->c_out == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  jitk_engine *pe = parse_engine();
  if (pe == NULL) {
    Py_DECREF(k);
    return NULL;
  }
  jitk_status st = red_create(k, pe, &k->parsed);
  if (st != JITK_OK) {
    Py_DECREF(k);
    if (!PyErr_Occurred()) raise_status(pe, st, NULL);
    return NULL;
  }
  jitk_reduction_num_params(k->parsed, &k->nin, &k->nout);
  if (k->reduce_type == Py_None && k->nout > 0) {
    /* CuPy reduces in the first output's type when reduce_type is not
     * given (the C API's default is the first input's): name it, and parse
     * again with it. */
    jitk_param_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    jitk_reduction_param(k->parsed, k->nin, &info);
    PyObject *t =
        PyUnicode_FromString(info.placeholder ? info.placeholder : dtype_name(info.dtype));
    if (t == NULL) {
      Py_DECREF(k);
      return NULL;
    }
    Py_DECREF(k->reduce_type);
    k->reduce_type = t;
    jitk_reduction_destroy(k->parsed);
    k->parsed = NULL;
    st = red_create(k, pe, &k->parsed);
    if (st != JITK_OK) {
      Py_DECREF(k);
      if (!PyErr_Occurred()) raise_status(pe, st, NULL);
      return NULL;
    }
  }
  if (k->nin + k->nout > MAX_PARAMS) {
    Py_DECREF(k);
    PyErr_Format(PyExc_ValueError, "at most %d parameters", MAX_PARAMS);
    return NULL;
  }
  k->params = PyTuple_New(k->nin + k->nout);
  const char *names[MAX_PARAMS];
  int num_names = 0;
  for (int p = 0; k->params && p < k->nin + k->nout; p++) {
    jitk_param_info info;
    memset(&info, 0, sizeof info);
    info.struct_size = sizeof info;
    jitk_reduction_param(k->parsed, p, &info);
    note_param_type(&k->types, p, &info, names, &num_names);
    PyTuple_SetItem(k->params, p, param_tuple(&info));
  }
  if (k->params == NULL || PyErr_Occurred()) {
    Py_DECREF(k);
    return NULL;
  }
  return (PyObject *)k;
}

static void red_dealloc(red_kernel *k) {
  for (int d = 0; d < MAX_DEVICES; d++) jitk_reduction_destroy(k->per_device[d]);
  jitk_reduction_destroy(k->parsed);
  PyObject **fields[] = {&k->in_params,     &k->out_params, &k->map_expr, &k->reduce_expr,
                         &k->post_map_expr, &k->identity,   &k->name,     &k->reduce_type,
                         &k->preamble,      &k->options,    &k->params,   &k->cached_codes,
                         &k->c_in,          &k->c_out};
  for (size_t i = 0; i < sizeof fields / sizeof fields[0]; i++) Py_CLEAR(*fields[i]);
  free_instance((PyObject *)k);
}

static jitk_reduction *red_on(red_kernel *k, int device) {
  if (!device_in_range(device)) return NULL;
  if (k->per_device[device] != NULL) return k->per_device[device];
  jitk_engine *e = device_engine(device);
  if (e == NULL) return NULL;
  jitk_status st = red_create(k, e, &k->per_device[device]);
  if (st != JITK_OK) {
    if (!PyErr_Occurred()) raise_status(e, st, NULL);
    return NULL;
  }
  return k->per_device[device];
}

static const char *red_source_of(void *kern) {
  const char *s = NULL;
  if (jitk_reduction_source((jitk_reduction *)kern, &s) != JITK_OK) return NULL;
  return s;
}

/* One axis as an int. One within int goes to the library as it is (it
 * refuses an axis past the array's dimensions, in its words); one past
 * int would wrap to another axis, so it is refused here. */
static int axis_value(PyObject *o, int *out) {
  int overflow = 0;
  long long v = PyLong_AsLongLongAndOverflow(o, &overflow);
  if (v == -1 && PyErr_Occurred()) return -1;
  if (overflow != 0 || v > INT_MAX || v < INT_MIN) {
    PyObject *type = axis_error_type();
    PyErr_Format(type, "axis %S is out of bounds", o);
    Py_DECREF(type);
    return -1;
  }
  *out = (int)v;
  return 0;
}

/* axis=: None (every axis), an int, or a sequence of ints; an int is
 * anything with __index__ (NumPy's integers), as NumPy takes it. */
static int parse_axes(PyObject *axis, int *axes, int *num) {
  if (axis == NULL || axis == Py_None) {
    *num = -1;
    return 0;
  }
  if (PyIndex_Check(axis)) {
    *num = 1;
    return axis_value(axis, &axes[0]);
  }
  PyObject *t = PySequence_Tuple(axis);
  if (t == NULL) {
    PyErr_SetString(PyExc_TypeError, "axis must be None, an int or a tuple of ints");
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(t);
  if (n > JITK_MAX_NDIM) {
    Py_DECREF(t);
    PyErr_SetString(PyExc_ValueError, "too many axes");
    return -1;
  }
  for (Py_ssize_t i = 0; i < n; i++) {
    if (axis_value(PyTuple_GetItem(t, i), &axes[i]) != 0) {
      Py_DECREF(t);
      return -1;
    }
  }
  Py_DECREF(t);
  *num = (int)n;
  return 0;
}

/* A call of the kernel, or (tune) its autotuning on the same arguments,
 * which leaves the outputs as the call would. */
static PyObject *red_run(red_kernel *k, PyObject *args, PyObject *kw, bool tune) {
  static const char *const names[] = {"axis", "keepdims", "out", "stream"};
  PyObject *kv[4];
  const char *kname = PyUnicode_AsUTF8AndSize(k->name, NULL);
  if (call_keywords(kw, names, kv, 4, kname) != 0) return NULL;
  Py_ssize_t n = PyTuple_Size(args);
  if (n != k->nin && n != k->nin + k->nout) {
    PyErr_Format(PyExc_TypeError, "Wrong number of arguments for %s", kname);
    return NULL;
  }
  PyObject *outarg = kv[2] != NULL && kv[2] != Py_None ? kv[2] : NULL;
  if (outarg != NULL && n != k->nin) {
    PyErr_SetString(PyExc_ValueError,
                    "cannot specify 'out' as both a positional and keyword "
                    "argument");
    return NULL;
  }
  if (outarg != NULL && k->nout != 1) {
    PyErr_SetString(PyExc_NotImplementedError,
                    "out= takes one array; a kernel with several outputs takes them "
                    "positionally");
    return NULL;
  }
  int axes[JITK_MAX_NDIM], num_axes = -1;
  if (parse_axes(kv[0], axes, &num_axes) != 0) return NULL;
  int keepdims = kv[1] != NULL ? PyObject_IsTrue(kv[1]) : 0;
  if (keepdims < 0) return NULL;
  /* With out=, the arguments are the inputs then it. */
  PyObject *full = args;
  if (outarg != NULL) {
    full = PyTuple_New(n + 1);
    if (full == NULL) return NULL;
    for (Py_ssize_t i = 0; i < n; i++)
      PyTuple_SetItem(full, i, Py_NewRef(PyTuple_GetItem(args, i)));
    PyTuple_SetItem(full, n, Py_NewRef(outarg));
    n++;
  } else {
    Py_INCREF(full);
  }
  call c;
  PyObject *out[MAX_PARAMS] = {NULL};
  int nalloc = 0;
  if (call_init(&c, (int)n, kv[3], false) != 0) goto fail;
  for (int i = 0; i < (int)n; i++)
    if (convert_arg(&c, PyTuple_GetItem(full, i), i, i >= k->nin, kname) != 0) goto fail;
  if (check_scalar_ints(&k->types, full, &c, kname) != 0) goto fail;
  if (pick_device(&c) != 0) goto fail;
  if (finish_stream(&c) != 0) goto fail;
  jitk_reduction *kern = red_on(k, c.device);
  if (kern == NULL) goto fail;
  for (int p = (int)n; p < k->nin + k->nout; p++) c.args[p] = jitk_arg_allocate();
  c.n = k->nin + k->nout;
  bool need = false;
  for (int p = k->nin; p < c.n; p++) need |= c.args[p].kind == JITK_ARG_ALLOCATE;
  nalloc = k->nout;
  if (need) {
    jitk_output_spec specs[MAX_PARAMS];
    jitk_status st = jitk_reduction_outputs(kern, c.args, (size_t)c.n, num_axes < 0 ? NULL : axes,
                                            num_axes, keepdims, specs);
    if (st != JITK_OK) {
      raise_status(engines[c.device], st, NULL);
      goto fail;
    }
    if (allocate_outputs(&c, k->nin, k->nout, specs, full, out) != 0) goto fail;
  } else {
    for (int j = 0; j < k->nout; j++) out[j] = Py_NewRef(PyTuple_GetItem(full, k->nin + j));
  }
  const int *ax = num_axes < 0 ? NULL : axes;
  jitk_status st;
  Py_BEGIN_ALLOW_THREADS st =
      tune ? jitk_reduction_autotune(kern, c.stream, c.args, (size_t)c.n, ax, num_axes, keepdims)
           : jitk_reduction_launch(kern, c.stream, c.args, (size_t)c.n, ax, num_axes, keepdims,
                                   NULL);
  /* See CAPTURED_FIRST_CALLS. Autotuning, which times runs, stays refused
   * during a capture. */
  if (st == JITK_ERR_STREAM_CAPTURE && !tune) {
    st = jitk_reduction_prepare(kern, c.args, (size_t)c.n, ax, num_axes, keepdims);
    if (st == JITK_OK)
      st = jitk_reduction_launch(kern, c.stream, c.args, (size_t)c.n, ax, num_axes, keepdims, NULL);
  }
  Py_END_ALLOW_THREADS if (st != JITK_OK) {
    raise_status(engines[c.device], st, NULL);
    annotate_compile_error(red_source_of(kern), k->options, k->name);
    goto fail;
  }
  note_specialization(k->cached_codes, k->last_sig, &k->have_sig, &c, red_source_of, kern);
  call_release(&c);
  Py_DECREF(full);
  /* As CuPy's ReductionKernel: the first output, whatever their number
   * (the others are the caller's, given as arguments). */
  for (int j = 1; j < k->nout; j++) Py_DECREF(out[j]);
  return out[0];
fail:
  for (int j = 0; j < nalloc; j++) Py_XDECREF(out[j]);
  call_release(&c);
  Py_DECREF(full);
  return NULL;
}

static PyObject *red_call(red_kernel *k, PyObject *args, PyObject *kw) {
  return red_run(k, args, kw, false);
}

static PyObject *red_autotune(red_kernel *k, PyObject *args, PyObject *kw) {
  return red_run(k, args, kw, true);
}

static PyObject *red_compile(red_kernel *k, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"types", "arch", "kept_ndim", "reduced_ndim", "index_bits", NULL};
  const char *types, *arch = NULL;
  int kept = 0, reduced = 1, bits = 32;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "s|$ziii:compile", kwlist, &types, &arch, &kept,
                                   &reduced, &bits))
    return NULL;
  jitk_engine *e = arch_engine_for(arch);
  if (e == NULL) return NULL;
  jitk_reduction *kern = NULL;
  jitk_status st = red_create(k, e, &kern);
  if (st != JITK_OK) return PyErr_Occurred() ? NULL : raise_status(e, st, NULL);
  jitk_reduction_layout layout;
  memset(&layout, 0, sizeof layout);
  layout.kept_ndim = kept;
  layout.reduced_ndim = reduced;
  layout.index_bits = bits;
  layout.strategy = 'i';
  const char *src = NULL;
  Py_BEGIN_ALLOW_THREADS st = jitk_reduction_compile(kern, types, &layout, &src, NULL);
  Py_END_ALLOW_THREADS PyObject *r = NULL;
  if (st == JITK_OK) {
    r = PyUnicode_FromString(src);
  } else {
    raise_status(e, st, NULL);
    annotate_compile_error(red_source_of(kern), k->options, k->name);
  }
  jitk_reduction_destroy(kern);
  return r;
}

static PyMemberDef red_members[] = {
    {"name", T_OBJECT_EX, offsetof(red_kernel, name), READONLY, NULL},
    {"in_params", T_OBJECT_EX, offsetof(red_kernel, in_params), READONLY, NULL},
    {"out_params", T_OBJECT_EX, offsetof(red_kernel, out_params), READONLY, NULL},
    {"map_expr", T_OBJECT_EX, offsetof(red_kernel, map_expr), READONLY, NULL},
    {"reduce_expr", T_OBJECT_EX, offsetof(red_kernel, reduce_expr), READONLY, NULL},
    {"post_map_expr", T_OBJECT_EX, offsetof(red_kernel, post_map_expr), READONLY, NULL},
    {"identity", T_OBJECT_EX, offsetof(red_kernel, identity), READONLY, NULL},
    {"reduce_type", T_OBJECT_EX, offsetof(red_kernel, reduce_type), READONLY, NULL},
    {"preamble", T_OBJECT_EX, offsetof(red_kernel, preamble), READONLY, NULL},
    {"options", T_OBJECT_EX, offsetof(red_kernel, options), READONLY, NULL},
    {"params", T_OBJECT_EX, offsetof(red_kernel, params), READONLY, NULL},
    {"nin", T_INT, offsetof(red_kernel, nin), READONLY, NULL},
    {"nout", T_INT, offsetof(red_kernel, nout), READONLY, NULL},
    {"reduce_dims", T_INT, offsetof(red_kernel, reduce_dims), READONLY, NULL},
    {"_cached_codes", T_OBJECT_EX, offsetof(red_kernel, cached_codes), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyObject *red_nargs(red_kernel *k, void *unused) {
  (void)unused;
  return PyLong_FromLong(k->nin + k->nout);
}

static PyGetSetDef red_getset[] = {{"nargs", (getter)red_nargs, NULL, NULL, NULL},
                                   {NULL, NULL, NULL, NULL, NULL}};

/* __reduce__: see "Pickling". */
static PyObject *red_reduce(red_kernel *k, PyObject *unused) {
  (void)unused;
  PyObject *values[] = {k->in_params,   k->out_params,    k->map_expr,
                        k->reduce_expr, k->post_map_expr, k->identity,
                        k->name,        k->reduce_type,   py_bool(k->reduce_dims),
                        k->preamble,    k->options};
  return reduce_to((PyObject *)k, red_keywords, values, 11);
}

static PyMethodDef red_methods[] = {
    {"__reduce__", (PyCFunction)red_reduce, METH_NOARGS,
     "pickles as the arguments the kernel was made with"},
    {"compile", (PyCFunction)(void (*)(void))red_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(types, *, arch=None, kept_ndim=0, reduced_ndim=1, index_bits=32) -> str\n\n"
     "Generates and compiles a specialization without arrays or a GPU; returns its source."},
    {"autotune", (PyCFunction)(void (*)(void))red_autotune, METH_VARARGS | METH_KEYWORDS,
     "autotune(*args, axis=None, keepdims=False, out=None, stream=None)\n\n"
     "Runs every strategy that applies to these arguments' layout, each timed on the\n"
     "stream (waiting for it), and keeps the fastest for later calls with the same\n"
     "shapes, strides, dtypes and axes, here and, through the kernel cache, in other\n"
     "processes. Returns the outputs as a call does."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot red_slots[] = {
    {Py_tp_new, red_new},
    {Py_tp_dealloc, red_dealloc},
    {Py_tp_call, red_call},
    {Py_tp_members, red_members},
    {Py_tp_getset, red_getset},
    {Py_tp_methods, red_methods},
    {Py_tp_doc,
     "ReductionKernel(in_params, out_params, map_expr, reduce_expr, post_map_expr, "
     "identity, name='reduce_kernel', reduce_type=None, reduce_dims=True, preamble='', "
     "options=())\n\nA reduction written as CuPy's ReductionKernel: "
     "k(*args, axis=None, keepdims=False, out=None, stream=None) returns the first output, "
     "as CuPy's does (further outputs are given as arguments). identity is taken as its "
     "str(); None or '' means none."},
    {0, NULL}};

static PyType_Spec red_spec = {"jitk.ReductionKernel", sizeof(red_kernel), 0,
                               Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, red_slots};

/* ------------------------------------------------------------------ */
/* RawModule and RawKernel                                            */
/* ------------------------------------------------------------------ */

typedef struct raw_module {
  PyObject_HEAD PyObject *code, *path, *options, *name_expressions, *backend;
  /* What NVRTC is given: the code with <cuComplex.h> translated where
   * asked, and the options with CuPy's include folders where the code
   * includes CuPy's headers. */
  PyObject *build_code, *build_options;
  int translate_cucomplex, enable_cooperative_groups, jitify;
  /* Pieces linked with the code (link_pieces): a tuple of (kind, bytes or
   * None, path or None); () for a module compiled alone. The link's
   * options (a tuple of str) and its jitk_lto. */
  PyObject *link, *link_options;
  int lto;
  jitk_module *per_device[MAX_DEVICES];
} raw_module;

static PyTypeObject *raw_module_type, *raw_kernel_type;

/* The kinds of link pieces by name, as link= takes them in (kind, data)
 * pairs, and by a file's extension. */
static const struct {
  const char *kind, *extension;
  jitk_link_kind value;
} link_kinds[] = {
    {"cuda", NULL, JITK_LINK_CUDA},        {"ptx", ".ptx", JITK_LINK_PTX},
    {"cubin", ".cubin", JITK_LINK_CUBIN},  {"fatbin", ".fatbin", JITK_LINK_FATBIN},
    {"ltoir", ".ltoir", JITK_LINK_LTO_IR}, {"object", ".o", JITK_LINK_OBJECT},
    {"library", ".a", JITK_LINK_LIBRARY},  {"device_runtime", NULL, JITK_LINK_DEVICE_RUNTIME}};
enum { LINK_KINDS = sizeof link_kinds / sizeof link_kinds[0] };

/* The index in link_kinds of the kind named `name` (NULL: none), or of
 * the file extension `ext` when name is NULL; LINK_KINDS if none has it. */
static size_t link_kind_of(const char *name, const char *ext) {
  size_t j = 0;
  while (j < LINK_KINDS && (name != NULL ? strcmp(name, link_kinds[j].kind) != 0
                                         : ext == NULL || link_kinds[j].extension == NULL ||
                                               strcmp(ext, link_kinds[j].extension) != 0))
    j++;
  return j;
}

/* link=: each piece a path (str or os.PathLike) whose extension names its
 * kind, a (kind, data) pair of a kind above and its bytes (str for cuda
 * and ptx sources), or ("device_runtime", None). *out: a tuple of (kind,
 * bytes or None, path or None), checked here so that a bad piece is an
 * error where the module is made. */
static int link_pieces(PyObject *link, PyObject **out) {
  *out = NULL;
  PyObject *seq = link == NULL || link == Py_None ? PyTuple_New(0) : PySequence_Tuple(link);
  if (seq == NULL) {
    PyErr_SetString(PyExc_TypeError, "link must be a sequence of pieces");
    return -1;
  }
  Py_ssize_t n = PyTuple_Size(seq);
  PyObject *res = PyTuple_New(n);
  for (Py_ssize_t i = 0; res != NULL && i < n; i++) {
    PyObject *item = PyTuple_GetItem(seq, i), *entry = NULL;
    if (PyTuple_Check(item) && PyTuple_Size(item) == 2) {
      PyObject *kind = PyTuple_GetItem(item, 0), *data = PyTuple_GetItem(item, 1);
      const char *k = PyUnicode_Check(kind) ? PyUnicode_AsUTF8AndSize(kind, NULL) : NULL;
      const size_t j = k != NULL ? link_kind_of(k, NULL) : LINK_KINDS;
      if (j == LINK_KINDS) {
        PyErr_Format(PyExc_ValueError,
                     "link piece %zd: kind %R is not one of 'cuda', 'ptx', 'cubin', 'fatbin', "
                     "'ltoir', 'object', 'library' and 'device_runtime'",
                     i, kind);
      } else if (link_kinds[j].value == JITK_LINK_DEVICE_RUNTIME) {
        if (data != Py_None)
          PyErr_Format(PyExc_ValueError, "link piece %zd: the device runtime takes None, not data",
                       i);
        else
          entry = Py_BuildValue("(sOO)", k, Py_None, Py_None);
      } else {
        const bool text =
            link_kinds[j].value == JITK_LINK_CUDA || link_kinds[j].value == JITK_LINK_PTX;
        PyObject *bytes = NULL;
        if (PyUnicode_Check(data) && text) {
          if (c_text(data, "a link piece's source") != NULL) bytes = PyUnicode_AsUTF8String(data);
        } else if (PyUnicode_Check(data) || data == Py_None ||
                   (bytes = PyBytes_FromObject(data)) == NULL) {
          /* PyBytes_FromObject takes bytes, bytearray, memoryview and
           * other buffers (and iterables of ints, which are bytes too). */
          char tn[64];
          type_name(data, tn, sizeof tn);
          PyErr_Clear();
          PyErr_Format(PyExc_TypeError,
                       "link piece %zd: the data of a '%s' piece must be %s, not %s", i, k,
                       text ? "a str or bytes" : "bytes", tn);
        }
        if (bytes != NULL && PyBytes_Size(bytes) == 0) {
          PyErr_Format(PyExc_ValueError, "link piece %zd: its data is empty", i);
          Py_CLEAR(bytes);
        }
        if (bytes != NULL && link_kinds[j].value == JITK_LINK_CUDA &&
            strlen(PyBytes_AsString(bytes)) != (size_t)PyBytes_Size(bytes)) {
          PyErr_Format(PyExc_ValueError, "link piece %zd: CUDA source holds a NUL character", i);
          Py_CLEAR(bytes);
        }
        if (bytes != NULL) entry = Py_BuildValue("(sNO)", k, bytes, Py_None);
      }
    } else {
      PyObject *path = PyOS_FSPath(item);
      if (path != NULL && !PyUnicode_Check(path)) {
        PyErr_Format(PyExc_TypeError, "link piece %zd: a path must be a str", i);
        Py_CLEAR(path);
      }
      if (path == NULL) {
        if (PyErr_ExceptionMatches(PyExc_TypeError)) {
          char tn[64];
          type_name(item, tn, sizeof tn);
          PyErr_Clear();
          PyErr_Format(PyExc_TypeError,
                       "link piece %zd, of type %s, is neither a path nor a (kind, data) pair", i,
                       tn);
        }
      } else if (c_text(path, "a link piece's path") != NULL) {
        const char *p = PyUnicode_AsUTF8AndSize(path, NULL), *dot = strrchr(p, '.');
        const char *slash = strrchr(p, '/');
        const size_t j =
            link_kind_of(NULL, dot == NULL || (slash != NULL && slash > dot) ? NULL : dot);
        if (j == LINK_KINDS)
          PyErr_Format(PyExc_ValueError,
                       "link piece %zd: the kind of file %R is read from its extension (.ptx, "
                       ".cubin, .fatbin, .ltoir, .o, .a); give a (kind, data) pair for others",
                       i, path);
        else
          entry = Py_BuildValue("(sOO)", link_kinds[j].kind, Py_None, path);
      }
      Py_XDECREF(path);
    }
    if (entry == NULL)
      Py_CLEAR(res);
    else
      PyTuple_SetItem(res, i, entry);
  }
  Py_DECREF(seq);
  *out = res;
  return res != NULL ? 0 : -1;
}

/* The module's code linked with its pieces (jitk_module_link), the code
 * being the first piece, with the module's NVRTC options and name
 * expressions. */
static jitk_status rm_link(raw_module *m, jitk_engine *e, const char *code,
                           const jitk_module_options *o, jitk_module **out) {
  Py_ssize_t n = PyTuple_Size(m->link);
  jitk_link_piece *pieces = PyMem_Calloc((size_t)n + 1, sizeof *pieces);
  const char **lopts = NULL;
  size_t nlopts = 0;
  if (pieces == NULL) {
    PyErr_NoMemory();
    return JITK_ERR_OUT_OF_MEMORY;
  }
  if (string_list(m->link_options, &lopts, &nlopts, "link_options") != 0) {
    PyMem_Free(pieces);
    return JITK_ERR_INVALID_ARGUMENT;
  }
  pieces[0].kind = JITK_LINK_CUDA;
  pieces[0].data = code;
  pieces[0].name = "module.cu";
  pieces[0].options = o;
  /* Checked by link_pieces: every kind is in the table, data is bytes. */
  for (Py_ssize_t i = 0; i < n; i++) {
    PyObject *t = PyTuple_GetItem(m->link, i), *data = PyTuple_GetItem(t, 1),
             *path = PyTuple_GetItem(t, 2);
    pieces[i + 1].kind =
        link_kinds[link_kind_of(PyUnicode_AsUTF8AndSize(PyTuple_GetItem(t, 0), NULL), NULL)].value;
    if (data != Py_None) {
      pieces[i + 1].data = PyBytes_AsString(data);
      pieces[i + 1].size = (size_t)PyBytes_Size(data);
    }
    if (path != Py_None) pieces[i + 1].path = PyUnicode_AsUTF8AndSize(path, NULL);
  }
  jitk_link_options lo;
  jitk_link_options_init(&lo);
  lo.lto = (jitk_lto)m->lto;
  lo.options = lopts;
  lo.num_options = nlopts;
  jitk_status st;
  Py_BEGIN_ALLOW_THREADS st = jitk_module_link(e, pieces, (size_t)n + 1, &lo, out);
  Py_END_ALLOW_THREADS PyMem_Free(pieces);
  PyMem_Free(lopts);
  return st;
}

/* The C++ standard library's headers for code compiled with jitify=True,
 * as CuPy's Jitify gave it: each is libcu++'s header of the same name
 * (CCCL's, on the include path jitk gives NVRTC), whose names the std
 * namespace then reaches through a using-directive, so that std::enable_if
 * or std::numeric_limits are cuda::std's; the C headers (<stdint.h>, ...)
 * declare their names in the global namespace too. Under NVRTC libcu++'s
 * <cfloat> defines none of the C macros (FLT_MAX, ...), and NVRTC
 * predefines no __FLT_MAX__ to take them from, so <cfloat> and <float.h>
 * spell out IEEE 754's binary32 and binary64 values. <cassert> and
 * <version> hold only macros (no namespace to reach). Without jitify=True,
 * as under CuPy, such an #include fails ("cannot open source file"). */
#define STD_USING "namespace std { using namespace ::cuda::std; }\n"
#define LIBCUXX(h, after) {h, "#pragma once\n#include <cuda/std/" h ">\n" after}
#define C_HEADER(h, cuda_h, after) {h, "#pragma once\n#include <cuda/std/" cuda_h ">\n" after}
#define FLOAT_MACROS                                                                     \
  "#ifndef FLT_MAX\n"                                                                    \
  "#define FLT_RADIX 2\n#define FLT_MANT_DIG 24\n#define DBL_MANT_DIG 53\n"              \
  "#define FLT_DIG 6\n#define DBL_DIG 15\n#define FLT_DECIMAL_DIG 9\n"                   \
  "#define DBL_DECIMAL_DIG 17\n#define DECIMAL_DIG 17\n"                                 \
  "#define FLT_MIN_EXP (-125)\n#define DBL_MIN_EXP (-1021)\n"                            \
  "#define FLT_MIN_10_EXP (-37)\n#define DBL_MIN_10_EXP (-307)\n"                        \
  "#define FLT_MAX_EXP 128\n#define DBL_MAX_EXP 1024\n"                                  \
  "#define FLT_MAX_10_EXP 38\n#define DBL_MAX_10_EXP 308\n"                              \
  "#define FLT_MAX 3.40282347e+38F\n#define DBL_MAX 1.7976931348623157e+308\n"           \
  "#define FLT_MIN 1.17549435e-38F\n#define DBL_MIN 2.2250738585072014e-308\n"           \
  "#define FLT_EPSILON 1.19209290e-07F\n#define DBL_EPSILON 2.2204460492503131e-16\n"    \
  "#define FLT_TRUE_MIN 1.40129846e-45F\n#define DBL_TRUE_MIN 4.9406564584124654e-324\n" \
  "#endif\n"
#define INT_TYPEDEFS(w)                                                                  \
  "typedef ::cuda::std::int" w "_t int" w "_t;\ntypedef ::cuda::std::uint" w "_t uint" w \
  "_t;\ntypedef ::cuda::std::int_least" w "_t int_least" w                               \
  "_t;\n"                                                                                \
  "typedef ::cuda::std::uint_least" w "_t uint_least" w                                  \
  "_t;\n"                                                                                \
  "typedef ::cuda::std::int_fast" w "_t int_fast" w                                      \
  "_t;\n"                                                                                \
  "typedef ::cuda::std::uint_fast" w "_t uint_fast" w "_t;\n"
static const jitk_header std_headers[] = {
    LIBCUXX("array", STD_USING),
    LIBCUXX("atomic", STD_USING),
    LIBCUXX("bit", STD_USING),
    LIBCUXX("bitset", STD_USING),
    LIBCUXX("cassert", ""),
    LIBCUXX("cfloat", FLOAT_MACROS STD_USING),
    LIBCUXX("chrono", STD_USING),
    LIBCUXX("climits", STD_USING),
    LIBCUXX("cmath", STD_USING),
    LIBCUXX("complex", STD_USING),
    LIBCUXX("concepts", STD_USING),
    LIBCUXX("cstddef", STD_USING),
    LIBCUXX("cstdint", STD_USING),
    LIBCUXX("cstdlib", STD_USING),
    LIBCUXX("cstring", STD_USING),
    LIBCUXX("functional", STD_USING),
    LIBCUXX("initializer_list", STD_USING),
    LIBCUXX("iterator", STD_USING),
    LIBCUXX("limits", STD_USING),
    LIBCUXX("memory", STD_USING),
    LIBCUXX("numbers", STD_USING),
    LIBCUXX("numeric", STD_USING),
    LIBCUXX("optional", STD_USING),
    LIBCUXX("ratio", STD_USING),
    LIBCUXX("span", STD_USING),
    LIBCUXX("tuple", STD_USING),
    LIBCUXX("type_traits", STD_USING),
    LIBCUXX("utility", STD_USING),
    LIBCUXX("variant", STD_USING),
    LIBCUXX("version", ""),
    C_HEADER("assert.h", "cassert", ""),
    C_HEADER("float.h", "cfloat", FLOAT_MACROS),
    C_HEADER("limits.h", "climits", ""),
    C_HEADER("math.h", "cmath", ""),
    C_HEADER("stddef.h", "cstddef",
             "typedef ::cuda::std::size_t size_t;\ntypedef ::cuda::std::ptrdiff_t ptrdiff_t;\n"),
    C_HEADER("stdint.h", "cstdint",
             INT_TYPEDEFS("8") INT_TYPEDEFS("16") INT_TYPEDEFS("32")
                 INT_TYPEDEFS("64") "typedef ::cuda::std::intptr_t intptr_t;\n"
                                    "typedef ::cuda::std::uintptr_t uintptr_t;\n"
                                    "typedef ::cuda::std::intmax_t intmax_t;\n"
                                    "typedef ::cuda::std::uintmax_t uintmax_t;\n"),
    C_HEADER("stdlib.h", "cstdlib", ""),
    C_HEADER("string.h", "cstring", ""),
};
#undef STD_USING
#undef LIBCUXX
#undef C_HEADER
#undef FLOAT_MACROS
#undef INT_TYPEDEFS

/* Compiles (or loads) the module on an engine. */
static jitk_status rm_build(raw_module *m, jitk_engine *e, jitk_module **out) {
  if (m->path != Py_None) {
    PyObject *b = PyUnicode_EncodeFSDefault(m->path);
    if (b == NULL) return JITK_ERR_INVALID_ARGUMENT;
    jitk_status st;
    const char *p = PyBytes_AsString(b);
    Py_BEGIN_ALLOW_THREADS st = jitk_module_create_from_file(e, p, out);
    Py_END_ALLOW_THREADS if (st == JITK_ERR_IO && access(p, F_OK) != 0) {
      /* Named as the driver names it, as under CuPy. */
      PyErr_Format(JitkError, "CUDA_ERROR_FILE_NOT_FOUND: file not found: %s", jitk_errmsg(e));
    }
    Py_DECREF(b);
    return st;
  }
  const char **opts = NULL, **names = NULL;
  size_t nopts = 0, nnames = 0;
  if (compile_options(m->build_options, &opts, &nopts) != 0) return JITK_ERR_INVALID_ARGUMENT;
  if (string_list(m->name_expressions, &names, &nnames, "name_expressions") != 0) {
    PyMem_Free(opts);
    return JITK_ERR_INVALID_ARGUMENT;
  }
  jitk_module_options o;
  memset(&o, 0, sizeof o);
  o.options = opts;
  o.num_options = nopts;
  o.name_expressions = names;
  o.num_name_expressions = nnames;
  if (m->jitify) {
    o.headers = std_headers;
    o.num_headers = sizeof std_headers / sizeof std_headers[0];
  }
  /* Checked as the module was made (rm_init_fields). */
  const char *code = PyUnicode_AsUTF8AndSize(m->build_code, NULL);
  jitk_status st;
  if (PyTuple_Size(m->link) == 0) {
    Py_BEGIN_ALLOW_THREADS st = jitk_module_create(e, code, &o, out);
    Py_END_ALLOW_THREADS
  } else {
    st = rm_link(m, e, code, &o, out);
  }
  PyMem_Free(opts);
  PyMem_Free(names);
  return st;
}

static jitk_module *rm_on(raw_module *m, int device) {
  if (!device_in_range(device)) return NULL;
  if (m->per_device[device] != NULL) return m->per_device[device];
  jitk_engine *e = device_engine(device);
  if (e == NULL) return NULL;
  /* The compile runs without the GIL: another thread may build the same
   * module meanwhile, and the first one kept is everyone's. */
  jitk_module *mod = NULL;
  jitk_status st = rm_build(m, e, &mod);
  if (st != JITK_OK) {
    if (!PyErr_Occurred()) raise_status(e, st, NULL);
    annotate_compile_error(m->code != Py_None ? PyUnicode_AsUTF8AndSize(m->code, NULL) : NULL,
                           m->options, NULL);
    return NULL;
  }
  if (m->per_device[device] != NULL)
    jitk_module_destroy(mod);
  else
    m->per_device[device] = mod;
  return m->per_device[device];
}

/* Whether `line` (up to its end) is an #include of <cuComplex.h>, with
 * any blanks between the tokens, as CuPy recognizes it. */
static bool includes_cucomplex(const char *line, const char *end) {
  static const char *const tokens[] = {"#", "include", "<", "cuComplex.h", ">"};
  const char *p = line;
  for (size_t t = 0; t < sizeof tokens / sizeof tokens[0]; t++) {
    while (p < end && (*p == ' ' || *p == '\t')) p++;
    size_t n = strlen(tokens[t]);
    if ((size_t)(end - p) < n || memcmp(p, tokens[t], n) != 0) return false;
    p += n;
  }
  return true;
}

/* translate_cucomplex: each #include <cuComplex.h> line becomes jitk's
 * bridge, which gives cuComplex's names over jitk::complex (templates, so
 * cuCadd takes single-precision operands too, as in CuPy). */
static PyObject *translate_cucomplex(PyObject *code) {
  Py_ssize_t n = 0;
  const char *src = PyUnicode_AsUTF8AndSize(code, &n);
  if (src == NULL) return NULL;
  static const char repl[] = "#include <jitk/cucomplex.cuh>  // translate_cucomplex";
  size_t cap = (size_t)n + 1, len = 0;
  for (const char *p = src; p < src + n;) {
    const char *nl = memchr(p, '\n', (size_t)(src + n - p));
    const char *end = nl ? nl : src + n;
    if (includes_cucomplex(p, end)) cap += sizeof repl;
    p = nl ? nl + 1 : src + n;
  }
  char *out = PyMem_Malloc(cap);
  if (out == NULL) return PyErr_NoMemory();
  for (const char *p = src; p < src + n;) {
    const char *nl = memchr(p, '\n', (size_t)(src + n - p));
    const char *end = nl ? nl : src + n;
    if (includes_cucomplex(p, end)) {
      memcpy(out + len, repl, sizeof repl - 1);
      len += sizeof repl - 1;
    } else {
      memcpy(out + len, p, (size_t)(end - p));
      len += (size_t)(end - p);
    }
    if (nl) out[len++] = '\n';
    p = nl ? nl + 1 : src + n;
  }
  PyObject *r = PyUnicode_FromStringAndSize(out, (Py_ssize_t)len);
  PyMem_Free(out);
  return r;
}

/* The options that let code written for CuPy #include <cupy/...> as it
 * does under CuPy: CuPy's own header folder, and the CCCL it ships
 * before the toolkit's (CuPy's headers are written against it). Empty
 * when CuPy is not installed. */
static PyObject *cupy_include_options(void) {
  PyObject *m = imported("cupy");
  if (m == NULL) {
    m = PyImport_ImportModule("cupy");
    if (m == NULL) {
      PyErr_Clear();
      return PyTuple_New(0);
    }
  }
  PyObject *file = PyObject_GetAttrString(m, "__file__");
  Py_DECREF(m);
  const char *f = file && PyUnicode_Check(file) ? PyUnicode_AsUTF8AndSize(file, NULL) : NULL;
  if (f == NULL) {
    Py_XDECREF(file);
    PyErr_Clear();
    return PyTuple_New(0);
  }
  const char *slash = strrchr(f, '/');
  int dir = slash ? (int)(slash - f) : 0;
  static const char *const sub[] = {"/_core/include/cupy/_cccl/libcudacxx",
                                    "/_core/include/cupy/_cccl/thrust",
                                    "/_core/include/cupy/_cccl/cub", "/_core/include"};
  PyObject *r = PyTuple_New(4);
  for (int i = 0; r != NULL && i < 4; i++) {
    char opt[4096];
    snprintf(opt, sizeof opt, "-I%.*s%s", dir, f, sub[i]);
    PyObject *o = PyUnicode_DecodeFSDefault(opt);
    if (o == NULL)
      Py_CLEAR(r);
    else
      PyTuple_SetItem(r, i, o);
  }
  Py_DECREF(file);
  return r;
}

/* CuPy deprecated its jitify argument: passing it at all, either way,
 * warns, in CuPy's words (its tests filter on them). jitk has no Jitify,
 * but gives code compiled with jitify=True what users took Jitify for: the
 * C++ standard library's headers, which NVRTC lacks (std_headers). */
static int warn_jitify(PyObject *kw, int jitify) {
  if (kw == NULL) return 0;
  PyObject *given = PyDict_GetItemString(kw, "jitify");
  if (given == NULL) return 0;
  return PyErr_WarnEx(PyExc_DeprecationWarning,
                      jitify ? "jitify=True is deprecated. jitk has no Jitify: it gives the code "
                               "the C++ standard library's headers from libcu++ instead "
                               "(<type_traits> is <cuda/std/type_traits>, in namespace std)."
                             : "The jitify argument is deprecated and has no effect in jitk. "
                               "Avoid passing jitify=False, which is the default.",
                      1);
}

static int rm_init_fields(raw_module *m, PyObject *code, PyObject *path, PyObject *options,
                          PyObject *names, PyObject *backend, int cucomplex, int coop, int jitify) {
  if ((code == NULL || code == Py_None) == (path == NULL || path == Py_None)) {
    PyErr_SetString(PyExc_TypeError,
                    "Exactly one of the code and path keyword arguments must be given.");
    return -1;
  }
  if (code != NULL && code != Py_None && !PyUnicode_Check(code)) {
    PyErr_SetString(PyExc_TypeError, "code must be a str");
    return -1;
  }
  if (path != NULL && path != Py_None && !PyUnicode_Check(path)) {
    PyErr_SetString(PyExc_TypeError, "path must be a str");
    return -1;
  }
  if (code != NULL && code != Py_None && c_text(code, "code") == NULL) return -1;
  if (path != NULL && path != Py_None && c_text(path, "path") == NULL) return -1;
  const char *b = backend && backend != Py_None ? c_text(backend, "backend") : "nvrtc";
  if (b == NULL) return -1;
  /* jitk compiles with NVRTC whatever the backend: 'nvcc' is taken so that
   * code written for CuPy's nvcc backend runs unchanged. */
  if (strcmp(b, "nvrtc") != 0 && strcmp(b, "nvcc") != 0) {
    PyErr_Format(PyExc_ValueError, "backend '%s' is not one of 'nvrtc' and 'nvcc'", b);
    return -1;
  }
  if (names != NULL && names != Py_None) {
    if (code == NULL || code == Py_None) {
      PyErr_SetString(PyExc_ValueError,
                      "name_expressions need CUDA C++ code to name kernels in, not a path");
      return -1;
    }
    if (strcmp(b, "nvrtc") != 0) {
      PyErr_SetString(PyExc_ValueError,
                      "name_expressions need backend='nvrtc': only NVRTC gives the mangled names "
                      "of name expressions");
      return -1;
    }
    if (PyUnicode_Check(names)) {
      PyErr_SetString(PyExc_TypeError, "name_expressions must be a sequence of str, not a str");
      return -1;
    }
  }
  if (jitify && (path != NULL && path != Py_None)) {
    PyErr_SetString(PyExc_ValueError, "jitify does not apply to a module loaded from a file");
    return -1;
  }
  /* As CuPy refuses it: Jitify was NVRTC's helper. */
  if (jitify && strcmp(b, "nvrtc") != 0) {
    PyErr_SetString(PyExc_ValueError, "jitify=True needs backend='nvrtc', as in CuPy");
    return -1;
  }
  bool from_file = path != NULL && path != Py_None;
  m->code = Py_NewRef(code ? code : Py_None);
  m->path = Py_NewRef(path ? path : Py_None);
  m->options = from_file ? PyTuple_New(0) : options_tuple(options);
  m->name_expressions = names && names != Py_None ? PySequence_Tuple(names) : Py_NewRef(Py_None);
  m->backend = PyUnicode_FromString(from_file ? "nvcc" : b);
  m->translate_cucomplex = from_file ? 0 : cucomplex;
  m->enable_cooperative_groups = coop;
  m->jitify = jitify;
  m->link = PyTuple_New(0);
  m->link_options = PyTuple_New(0);
  m->lto = JITK_LTO_AUTO;
  if (m->options == NULL || m->name_expressions == NULL || m->backend == NULL || m->link == NULL ||
      m->link_options == NULL)
    return -1;
  if (from_file) return 0;
  m->build_code = m->translate_cucomplex ? translate_cucomplex(m->code) : Py_NewRef(m->code);
  if (m->build_code == NULL) return -1;
  const char *text = c_text(m->build_code, "code");
  if (text == NULL) return -1;
  if (strstr(text, "cupy/") != NULL) {
    PyObject *inc = cupy_include_options();
    if (inc == NULL) return -1;
    /* CuPy's CCCL goes first, its header folder after the user's. */
    PyObject *front = PyTuple_GetSlice(inc, 0, 3), *back = PyTuple_GetSlice(inc, 3, 4);
    PyObject *mid = front && back ? PySequence_Concat(front, m->options) : NULL;
    m->build_options = mid ? PySequence_Concat(mid, back) : NULL;
    Py_XDECREF(front);
    Py_XDECREF(back);
    Py_XDECREF(mid);
    Py_DECREF(inc);
  } else {
    m->build_options = Py_NewRef(m->options);
  }
  return m->build_options != NULL ? 0 : -1;
}

/* link=, link_options= and lto= of RawModule (rm_new). */
static int rm_init_link(raw_module *m, PyObject *link, PyObject *link_options, PyObject *lto) {
  PyObject *pieces = NULL;
  if (link_pieces(link, &pieces) != 0) return -1;
  Py_DECREF(m->link);
  m->link = pieces;
  bool linked = PyTuple_Size(pieces) > 0;
  if (linked && m->path != Py_None) {
    PyErr_SetString(PyExc_ValueError,
                    "link needs CUDA code to link the pieces with, not a module's path");
    return -1;
  }
  if (link_options != NULL && link_options != Py_None) {
    if (PyUnicode_Check(link_options)) {
      PyErr_SetString(PyExc_TypeError, "link_options must be a sequence of str, not a str");
      return -1;
    }
    PyObject *t = PySequence_Tuple(link_options);
    if (t == NULL) return -1;
    Py_DECREF(m->link_options);
    m->link_options = t;
    const char **v = NULL;
    size_t n = 0;
    if (string_list(t, &v, &n, "link_options") != 0) return -1;
    PyMem_Free(v);
  }
  int on = lto != NULL && lto != Py_None ? PyObject_IsTrue(lto) : 0;
  if (on < 0) return -1;
  /* The defaults given explicitly (link_options=(), lto=False or None) are
   * taken without pieces, so that code passing its settings through need
   * not leave them out; options that would change a link are refused. */
  if (!linked && (PyTuple_Size(m->link_options) > 0 || on)) {
    PyErr_SetString(PyExc_ValueError, "link_options and lto need pieces to link (link=)");
    return -1;
  }
  if (lto != NULL && lto != Py_None) m->lto = on ? JITK_LTO_ON : JITK_LTO_OFF;
  return 0;
}

/* RawModule(*, code=None, path=None, options=(), backend='nvrtc',
 * translate_cucomplex=False, enable_cooperative_groups=False,
 * name_expressions=None, jitify=False, link=(), link_options=(),
 * lto=None): CuPy's keywords, all of them keyword-only as in CuPy, and
 * jitk's own for a program linked from the code and other pieces (the C
 * library's jitk_module_link): link= the pieces (link_pieces),
 * link_options= nvJitLink's options, lto= link-time optimization (None:
 * jitk decides, as JITK_LTO_AUTO). rm_keywords serves rm_reduce too, in
 * that order. */
static char *rm_keywords[] = {"code",
                              "path",
                              "options",
                              "backend",
                              "translate_cucomplex",
                              "enable_cooperative_groups",
                              "name_expressions",
                              "jitify",
                              "link",
                              "link_options",
                              "lto",
                              NULL};

static PyObject *rm_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  char **kwlist = rm_keywords;
  PyObject *code = NULL, *path = NULL, *options = NULL, *names = NULL, *backend = NULL;
  PyObject *link = NULL, *link_options = NULL, *lto = NULL;
  int cucomplex = 0, coop = 0, jitify = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|$OOOOppOpOOO:RawModule", kwlist, &code, &path,
                                   &options, &backend, &cucomplex, &coop, &names, &jitify, &link,
                                   &link_options, &lto))
    return NULL;
  if (warn_jitify(kw, jitify) != 0) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  raw_module *m = (raw_module *)alloc(type, 0);
  if (m == NULL) return NULL;
  if (rm_init_fields(m, code, path, options, names, backend, cucomplex, coop, jitify) != 0 ||
      rm_init_link(m, link, link_options, lto) != 0) {
    Py_DECREF(m);
    return NULL;
  }
  return (PyObject *)m;
}

static void rm_dealloc(raw_module *m) {
  for (int d = 0; d < MAX_DEVICES; d++) jitk_module_destroy(m->per_device[d]);
  Py_CLEAR(m->code);
  Py_CLEAR(m->path);
  Py_CLEAR(m->options);
  Py_CLEAR(m->name_expressions);
  Py_CLEAR(m->backend);
  Py_CLEAR(m->build_code);
  Py_CLEAR(m->build_options);
  Py_CLEAR(m->link);
  Py_CLEAR(m->link_options);
  free_instance((PyObject *)m);
}

static int write_log(PyObject *stream, const char *log) {
  if (stream == NULL || stream == Py_None || log == NULL) return 0;
  PyObject *r = PyObject_CallMethod(stream, "write", "s", log);
  Py_XDECREF(r);
  return r ? 0 : -1;
}

/* m.compile(log_stream=None, *, arch=None): compiles now, for the current
 * device or, with arch (or without a GPU), for that target alone. */
static PyObject *rm_compile(raw_module *m, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {"log_stream", "arch", NULL};
  PyObject *log = NULL;
  const char *arch = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$z:compile", kwlist, &log, &arch)) return NULL;
  /* Checked before compiling, so that a wrong stream costs no compile and
   * fails as a wrong argument rather than as an AttributeError after it. */
  if (log != NULL && log != Py_None && !PyObject_HasAttrString(log, "write")) {
    char tn[64];
    type_name(log, tn, sizeof tn);
    PyErr_Format(PyExc_TypeError,
                 "log_stream must have a write method (a file, io.StringIO), not be a %s", tn);
    return NULL;
  }
  jitk_module *mod = NULL;
  if (arch != NULL || count_devices() == 0) {
    jitk_engine *e = arch_engine_for(arch);
    if (e == NULL) return NULL;
    jitk_status st = rm_build(m, e, &mod);
    if (st != JITK_OK) {
      if (!PyErr_Occurred()) raise_status(e, st, NULL);
      annotate_compile_error(m->code != Py_None ? PyUnicode_AsUTF8AndSize(m->code, NULL) : NULL,
                             m->options, NULL);
      return NULL;
    }
    const char *text = NULL;
    jitk_module_log(mod, &text);
    int r = write_log(log, text);
    jitk_module_destroy(mod);
    if (r != 0) return NULL;
    Py_RETURN_NONE;
  }
  find_cupy();
  mod = rm_on(m, current_device(LIB_OTHER));
  if (mod == NULL) return NULL;
  const char *text = NULL;
  jitk_module_log(mod, &text);
  if (write_log(log, text) != 0) return NULL;
  Py_RETURN_NONE;
}

static PyObject *rk_make(PyObject *module, PyObject *name);
typedef struct raw_kernel raw_kernel;
static jitk_kernel *rk_current(raw_kernel *k);

static PyObject *rm_get_function(raw_module *m, PyObject *name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "the kernel's name must be a str");
    return NULL;
  }
  if (c_text(name, "the kernel's name") == NULL) return NULL;
  PyObject *k = rk_make((PyObject *)m, name);
  /* The kernel is looked up now, as in CuPy: a wrong name fails here. */
  if (k != NULL && count_devices() > 0 && rk_current((raw_kernel *)k) == NULL) Py_CLEAR(k);
  return k;
}

/* m.get_global(name): the address of a __constant__ or __device__
 * variable, as CuPy gives it: a cupy.cuda.MemoryPointer over memory the
 * module owns (the pointer keeps the module alive), so a cupy.ndarray can
 * be built on it. Without CuPy, the address as an int. */
static PyObject *rm_get_global(raw_module *m, PyObject *name) {
  if (!PyUnicode_Check(name)) {
    PyErr_SetString(PyExc_TypeError, "the variable's name must be a str");
    return NULL;
  }
  find_cupy();
  int device = count_devices() > 0 ? current_device(LIB_OTHER) : -1;
  if (device < 0) {
    PyErr_Format(PyExc_RuntimeError, "no CUDA device: %s", no_device_why);
    return NULL;
  }
  jitk_module *mod = rm_on(m, device);
  if (mod == NULL) return NULL;
  void *ptr = NULL;
  size_t bytes = 0;
  const char *text = c_text(name, "the variable's name");
  if (text == NULL) return NULL;
  jitk_status st = jitk_module_get_global(mod, text, &ptr, &bytes);
  if (st == JITK_ERR_NOT_FOUND) {
    PyErr_Format(JitkError, "CUDA_ERROR_NOT_FOUND: named symbol not found: %s",
                 jitk_errmsg(engines[device]));
    return NULL;
  }
  if (st != JITK_OK) return raise_status(engines[device], st, NULL);
  PyObject *cupy = imported("cupy");
  if (cupy == NULL) return PyLong_FromVoidPtr(ptr);
  PyObject *unowned = attr_path(cupy, "cuda.memory.UnownedMemory");
  PyObject *memptr = unowned ? attr_path(cupy, "cuda.memory.MemoryPointer") : NULL;
  Py_DECREF(cupy);
  PyObject *mem = memptr ? PyObject_CallFunction(unowned, "NnOi", PyLong_FromVoidPtr(ptr),
                                                 (Py_ssize_t)bytes, (PyObject *)m, device)
                         : NULL;
  PyObject *r = mem ? PyObject_CallFunction(memptr, "Oi", mem, 0) : NULL;
  Py_XDECREF(unowned);
  Py_XDECREF(memptr);
  Py_XDECREF(mem);
  return r;
}

/* __reduce__: see "Pickling". jitify=True is kept (it gives the code the
 * standard headers); _rebuild sets it without the constructor's warning,
 * which the module's maker saw already. */
static PyObject *rm_reduce(raw_module *m, PyObject *unused) {
  (void)unused;
  const bool code = m->path == Py_None, linked = PyTuple_Size(m->link) > 0;
  /* A piece given by its path pickles as the path, read again where the
   * module is built, as a module of a file is. */
  PyObject *pieces = NULL;
  if (linked) {
    Py_ssize_t n = PyTuple_Size(m->link);
    pieces = PyList_New(n);
    for (Py_ssize_t i = 0; pieces != NULL && i < n; i++) {
      PyObject *t = PyTuple_GetItem(m->link, i), *path = PyTuple_GetItem(t, 2);
      PyObject *p = path != Py_None ? Py_NewRef(path)
                                    : PyTuple_Pack(2, PyTuple_GetItem(t, 0), PyTuple_GetItem(t, 1));
      if (p == NULL)
        Py_CLEAR(pieces);
      else
        PyList_SetItem(pieces, i, p);
    }
    if (pieces == NULL) return NULL;
  }
  PyObject *values[] = {code ? m->code : NULL,
                        code ? NULL : m->path,
                        code ? m->options : NULL,
                        code ? m->backend : NULL,
                        code ? py_bool(m->translate_cucomplex) : NULL,
                        py_bool(m->enable_cooperative_groups),
                        m->name_expressions != Py_None ? m->name_expressions : NULL,
                        m->jitify ? Py_True : NULL,
                        pieces,
                        linked ? m->link_options : NULL,
                        linked && m->lto != JITK_LTO_AUTO ? py_bool(m->lto == JITK_LTO_ON) : NULL};
  PyObject *r = reduce_to((PyObject *)m, rm_keywords, values, 11);
  Py_XDECREF(pieces);
  return r;
}

static PyMethodDef rm_methods[] = {
    {"__reduce__", (PyCFunction)rm_reduce, METH_NOARGS,
     "pickles as the arguments the module was made with"},
    {"get_global", (PyCFunction)rm_get_global, METH_O,
     "get_global(name) -> cupy.cuda.MemoryPointer: the address of the module's __constant__ or "
     "__device__ variable `name` on the current device (an int when CuPy is not installed)."},
    {"get_function", (PyCFunction)rm_get_function, METH_O,
     "get_function(name) -> RawKernel: the kernel named `name`, an extern \"C\" symbol or one "
     "of the module's name expressions."},
    {"compile", (PyCFunction)(void (*)(void))rm_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(log_stream=None, *, arch=None): compiles now; arch compiles for that target "
     "without a GPU. NVRTC's log goes to log_stream."},
    {NULL, NULL, 0, NULL}};

static PyMemberDef rm_members[] = {
    {"code", T_OBJECT_EX, offsetof(raw_module, code), READONLY, NULL},
    {"path", T_OBJECT_EX, offsetof(raw_module, path), READONLY, NULL},
    {"file_path", T_OBJECT_EX, offsetof(raw_module, path), READONLY,
     "the file the module was loaded from (None for code), as CuPy names it"},
    {"options", T_OBJECT_EX, offsetof(raw_module, options), READONLY, NULL},
    {"name_expressions", T_OBJECT_EX, offsetof(raw_module, name_expressions), READONLY, NULL},
    {"backend", T_OBJECT_EX, offsetof(raw_module, backend), READONLY, NULL},
    {"link", T_OBJECT_EX, offsetof(raw_module, link), READONLY,
     "the pieces linked with the code, as (kind, data, path) tuples"},
    {"link_options", T_OBJECT_EX, offsetof(raw_module, link_options), READONLY, NULL},
    {NULL, 0, 0, 0, NULL}};

static PyObject *rm_get_coop(raw_module *m, void *unused) {
  (void)unused;
  return Py_NewRef(py_bool(m->enable_cooperative_groups));
}

static PyObject *rm_get_lto(raw_module *m, void *unused) {
  (void)unused;
  return Py_NewRef(m->lto == JITK_LTO_AUTO ? Py_None : py_bool(m->lto == JITK_LTO_ON));
}

static PyGetSetDef rm_getset[] = {
    {"enable_cooperative_groups", (getter)rm_get_coop, NULL, NULL, NULL},
    {"lto", (getter)rm_get_lto, NULL, "link-time optimization: None (jitk decides), True, False",
     NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyType_Slot rm_slots[] = {
    {Py_tp_new, rm_new},
    {Py_tp_dealloc, rm_dealloc},
    {Py_tp_methods, rm_methods},
    {Py_tp_members, rm_members},
    {Py_tp_getset, rm_getset},
    {Py_tp_doc,
     "RawModule(*, code=None, path=None, options=(), backend='nvrtc', "
     "translate_cucomplex=False, enable_cooperative_groups=False, "
     "name_expressions=None, jitify=False, link=(), link_options=(), lto=None)\n\n"
     "CUDA source compiled with NVRTC (or a cubin, PTX or fatbin file), as CuPy's "
     "RawModule; get_function(name) gives its kernels. link= links the code with other "
     "pieces through nvJitLink: ('cuda', source), files whose extension names their kind "
     "(.ptx, .cubin, .fatbin, .ltoir, .o, .a), (kind, bytes) pairs and "
     "('device_runtime', None). jitify=True (deprecated, as in CuPy) gives the code the C++ "
     "standard library's headers, from libcu++ in namespace std."},
    {0, NULL}};

static PyType_Spec rm_spec = {"jitk.RawModule", sizeof(raw_module), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, rm_slots};

typedef struct raw_kernel {
  PyObject_HEAD PyObject *module; /* a RawModule */
  PyObject *name;
  jitk_kernel *per_device[MAX_DEVICES];
  long long max_dynamic_shared; /* -1: not set */
  int carveout;                 /* -2: not set */
} raw_kernel;

static PyObject *rk_make(PyObject *module, PyObject *name) {
  allocfunc alloc = (allocfunc)PyType_GetSlot(raw_kernel_type, Py_tp_alloc);
  raw_kernel *k = (raw_kernel *)alloc(raw_kernel_type, 0);
  if (k == NULL) return NULL;
  k->module = Py_NewRef(module);
  k->name = Py_NewRef(name);
  k->max_dynamic_shared = -1;
  k->carveout = -2;
  return (PyObject *)k;
}

static PyObject *rk_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {
      "code",   "name", "options", "backend", "translate_cucomplex", "enable_cooperative_groups",
      "jitify", NULL};
  PyObject *code, *name, *options = NULL, *backend = NULL;
  int cucomplex = 0, coop = 0, jitify = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "UU|OO$ppp:RawKernel", kwlist, &code, &name, &options,
                                   &backend, &cucomplex, &coop, &jitify))
    return NULL;
  if (warn_jitify(kw, jitify) != 0) return NULL;
  if (c_text(name, "the kernel's name") == NULL) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(raw_module_type, Py_tp_alloc);
  raw_module *m = (raw_module *)alloc(raw_module_type, 0);
  if (m == NULL) return NULL;
  if (rm_init_fields(m, code, NULL, options, NULL, backend, cucomplex, coop, jitify) != 0) {
    Py_DECREF(m);
    return NULL;
  }
  allocfunc kalloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  raw_kernel *k = (raw_kernel *)kalloc(type, 0);
  if (k == NULL) {
    Py_DECREF(m);
    return NULL;
  }
  k->module = (PyObject *)m;
  k->name = Py_NewRef(name);
  k->max_dynamic_shared = -1;
  k->carveout = -2;
  return (PyObject *)k;
}

static void rk_dealloc(raw_kernel *k) {
  /* Kernels belong to their module, which frees them. */
  Py_CLEAR(k->module);
  Py_CLEAR(k->name);
  free_instance((PyObject *)k);
}

static jitk_kernel *rk_on(raw_kernel *k, int device) {
  if (!device_in_range(device)) return NULL;
  if (k->per_device[device] != NULL) return k->per_device[device];
  jitk_module *mod = rm_on((raw_module *)k->module, device);
  if (mod == NULL) return NULL;
  jitk_status st =
      jitk_module_get_kernel(mod, PyUnicode_AsUTF8AndSize(k->name, NULL), &k->per_device[device]);
  if (st != JITK_OK) {
    if (st == JITK_ERR_NOT_FOUND) {
      /* Under CuPy the driver reports a missing kernel; its error's name
       * leads the message, as code written for CuPy looks for it. */
      PyErr_Format(JitkError, "CUDA_ERROR_NOT_FOUND: named symbol not found: %s",
                   jitk_errmsg(engines[device]));
      return NULL;
    }
    raise_status(engines[device], st, NULL);
    return NULL;
  }
  if (k->max_dynamic_shared >= 0)
    st = jitk_kernel_set_max_dynamic_shared(k->per_device[device], (size_t)k->max_dynamic_shared);
  if (st == JITK_OK && k->carveout >= -1)
    st = jitk_kernel_set_attribute(k->per_device[device],
                                   JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, k->carveout);
  if (st != JITK_OK) {
    raise_status(engines[device], st, NULL);
    k->per_device[device] = NULL;
    return NULL;
  }
  return k->per_device[device];
}

static int to_dim3(PyObject *o, jitk_dim3 *d, const char *what) {
  d->x = d->y = d->z = 1;
  /* An int, or anything with __index__: grids computed with NumPy's
   * integers are common. */
  if (PyIndex_Check(o)) {
    long v = PyLong_AsLong(o);
    if (v == -1 && PyErr_Occurred()) return -1;
    if (v < 0 || v > UINT32_MAX) {
      PyErr_Format(PyExc_ValueError, "%s must be a positive int", what);
      return -1;
    }
    d->x = (unsigned int)v;
    return 0;
  }
  PyObject *t = PySequence_Tuple(o);
  if (t == NULL || PyTuple_Size(t) < 1 || PyTuple_Size(t) > 3) {
    Py_XDECREF(t);
    PyErr_Format(PyExc_ValueError, "%s must be an int or a tuple of 1 to 3 ints", what);
    return -1;
  }
  unsigned int *v[3] = {&d->x, &d->y, &d->z};
  for (Py_ssize_t i = 0; i < PyTuple_Size(t); i++) {
    long x = PyLong_AsLong(PyTuple_GetItem(t, i));
    if (x == -1 && PyErr_Occurred()) {
      Py_DECREF(t);
      return -1;
    }
    if (x < 0 || x > UINT32_MAX) {
      Py_DECREF(t);
      PyErr_Format(PyExc_ValueError, "%s must be made of positive ints", what);
      return -1;
    }
    *v[i] = (unsigned int)x;
  }
  Py_DECREF(t);
  return 0;
}

/* CuPy hands a Python int to a raw kernel as 8 bytes, whatever the
 * parameter, and the driver reads as many as the parameter has: a small
 * int reaches an `int` parameter intact. jitk checks sizes, so it narrows
 * an integer scalar to a smaller integer parameter itself, when the value
 * fits that width (as a signed or an unsigned number); a value that does
 * not fit is an OverflowError rather than silently cut. A Python float for
 * a 4-byte parameter becomes a float32. */
static int narrow_int_args(jitk_kernel *kern, call *c, PyObject *objs, const char *kernel) {
  const uint32_t *sizes = NULL;
  int np = -1;
  if (jitk_kernel_param_sizes(kern, &sizes, &np) != JITK_OK || np != c->n) return 0;
  for (int i = 0; i < c->n; i++) {
    jitk_arg *a = &c->args[i];
    if (a->kind == JITK_ARG_SCALAR && a->dtype == JITK_FLOAT64 && sizes[i] == 4 &&
        PyFloat_CheckExact(PyTuple_GetItem(objs, i))) {
      /* A Python float has no width of its own: for a 4-byte parameter it
       * is a float32 (CuPy would hand over half of a double's bits). A
       * NumPy float64 keeps its type, and its size is checked. */
      *a = jitk_arg_f32((float)a->value.f64);
      continue;
    }
    if (a->kind != JITK_ARG_SCALAR || a->dtype < JITK_INT8 || a->dtype > JITK_UINT64) continue;
    size_t have = dtype_size(a->dtype), want = sizes[i];
    if (want >= have || (want != 1 && want != 2 && want != 4)) continue;
    bool is_signed = a->dtype <= JITK_INT64;
    int64_t v = 0;
    uint64_t u = 0;
    switch (a->dtype) {
      case JITK_INT8: v = a->value.i8; break;
      case JITK_INT16: v = a->value.i16; break;
      case JITK_INT32: v = a->value.i32; break;
      case JITK_INT64: v = a->value.i64; break;
      case JITK_UINT8: u = a->value.u8; break;
      case JITK_UINT16: u = a->value.u16; break;
      case JITK_UINT32: u = a->value.u32; break;
      default: u = a->value.u64; break;
    }
    if (is_signed && v >= 0) {
      u = (uint64_t)v;
      is_signed = false;
    }
    int bits = (int)want * 8;
    bool fits = is_signed ? v >= -((int64_t)1 << (bits - 1)) : u <= (((uint64_t)1 << bits) - 1);
    if (!fits) {
      PyErr_Format(PyExc_OverflowError,
                   "%s: argument %d does not fit the kernel's %d-byte parameter", kernel, i,
                   (int)want);
      return -1;
    }
    /* Unsigned when the value is not negative: its bits are the same in
     * either type of that width. */
    if (is_signed)
      *a = want == 1   ? jitk_arg_i8((int8_t)v)
           : want == 2 ? jitk_arg_i16((int16_t)v)
                       : jitk_arg_i32((int32_t)v);
    else
      *a = want == 1   ? jitk_arg_u8((uint8_t)u)
           : want == 2 ? jitk_arg_u16((uint16_t)u)
                       : jitk_arg_u32((uint32_t)u);
  }
  return 0;
}

/* A cupy.cuda.MemoryPointer: CuPy passes its address as a pointer. */
static int memory_pointer_arg(PyObject *o, jitk_arg *out) {
  if (cupy_ndarray_type == NULL) find_cupy();
  if (cupy_memptr_type == NULL || !is_instance(o, cupy_memptr_type)) return 0;
  PyObject *p = PyObject_GetAttr(o, s_ptr);
  if (p == NULL) return -1;
  unsigned long long v = PyLong_AsUnsignedLongLong(p);
  Py_DECREF(p);
  if (v == (unsigned long long)-1 && PyErr_Occurred()) return -1;
  *out = jitk_arg_ptr((void *)(uintptr_t)v, JITK_DTYPE_NONE);
  return 1;
}

/* Reads a call's arguments into values[] by keyword (call_keywords) and
 * by position, as Python binds them; the first `required` must be given.
 * Written out
 * because PyArg_ParseTupleAndKeywords costs as much as reading two arrays
 * (its format is interpreted at every call). */
static int bind_args(PyObject *args, PyObject *kw, const char *const *names, int n, int required,
                     PyObject **values, const char *fname) {
  Py_ssize_t npos = PyTuple_Size(args);
  if (npos > n) {
    PyErr_Format(PyExc_TypeError, "%s() takes at most %d arguments (%zd given)", fname, n, npos);
    return -1;
  }
  if (call_keywords(kw, names, values, n, fname) != 0) return -1;
  for (Py_ssize_t i = 0; i < npos; i++) {
    if (values[i] != NULL) {
      PyErr_Format(PyExc_TypeError, "%s() got multiple values for argument '%s'", fname, names[i]);
      return -1;
    }
    values[i] = PyTuple_GetItem(args, i);
  }
  for (int i = 0; i < required; i++)
    if (values[i] == NULL) {
      PyErr_Format(PyExc_TypeError, "%s() missing required argument '%s' (pos %d)", fname, names[i],
                   i + 1);
      return -1;
    }
  return 0;
}

/* k(grid, block, args, shared_mem=0, stream=None,
 * enable_cooperative_groups=False, *, cluster=None,
 * programmatic_dependent_launch=False), as CuPy's Function.__call__: arrays
 * go as pointers to their first element, scalars as CuPy types them. The
 * keyword-only two are cuda.core's launch options that CuPy lacks: a
 * thread-block cluster's shape and programmatic dependent launch (the C
 * library's jitk_kernel_launch_config). */
static PyObject *rk_call(raw_kernel *k, PyObject *args, PyObject *kw) {
  static const char *const names[] = {"grid",    "block",
                                      "args",    "shared_mem",
                                      "stream",  "enable_cooperative_groups",
                                      "cluster", "programmatic_dependent_launch"};
  PyObject *v[8];
  if (PyTuple_Size(args) > 6) {
    PyErr_Format(PyExc_TypeError,
                 "RawKernel() takes at most 6 arguments (%zd given); cluster and "
                 "programmatic_dependent_launch are keyword-only",
                 PyTuple_Size(args));
    return NULL;
  }
  if (bind_args(args, kw, names, 8, 3, v, "RawKernel") != 0) return NULL;
  PyObject *grid_o = v[0], *block_o = v[1], *kargs = v[2], *stream_o = v[4];
  unsigned long long shared = 0;
  if (v[3] != NULL) {
    PyObject *i = PyIndex_Check(v[3]) ? PyNumber_Index(v[3]) : NULL;
    if (i == NULL) {
      PyErr_Clear();
      PyErr_SetString(PyExc_TypeError, "shared_mem must be an int");
      return NULL;
    }
    shared = PyLong_AsUnsignedLongLong(i);
    Py_DECREF(i);
    if (shared == (unsigned long long)-1 && PyErr_Occurred()) return NULL;
  }
  int coop = v[5] != NULL ? PyObject_IsTrue(v[5]) : 0;
  if (coop < 0) return NULL;
  int pdl = v[7] != NULL ? PyObject_IsTrue(v[7]) : 0;
  if (pdl < 0) return NULL;
  jitk_dim3 grid, block, cluster = {0, 0, 0};
  if (to_dim3(grid_o, &grid, "grid") != 0 || to_dim3(block_o, &block, "block") != 0) return NULL;
  if (v[6] != NULL && v[6] != Py_None && to_dim3(v[6], &cluster, "cluster") != 0) return NULL;
  /* As cuda.core: a cluster has at least one block along each axis
   * (cluster=None is no cluster; to_dim3 makes a missing axis 1). */
  if (v[6] != NULL && v[6] != Py_None && (cluster.x == 0 || cluster.y == 0 || cluster.z == 0)) {
    PyErr_Format(PyExc_ValueError,
                 "cluster (%u, %u, %u) has a dimension of 0; each must be at least 1 "
                 "(cluster=None for no cluster)",
                 cluster.x, cluster.y, cluster.z);
    return NULL;
  }
  PyObject *t = PySequence_Tuple(kargs);
  if (t == NULL) {
    PyErr_SetString(PyExc_TypeError, "args must be a tuple or a list");
    return NULL;
  }
  Py_ssize_t n = PyTuple_Size(t);
  if (n > MAX_ARGS) {
    Py_DECREF(t);
    PyErr_Format(PyExc_ValueError, "at most %d arguments", MAX_ARGS);
    return NULL;
  }
  call c;
  PyObject *result = NULL;
  const char *kname = PyUnicode_AsUTF8AndSize(k->name, NULL);
  if (call_init(&c, (int)n, stream_o, true) != 0) goto done;
  for (int i = 0; i < (int)n; i++) {
    PyObject *o = PyTuple_GetItem(t, i);
    if (o == Py_None) {
      c.args[i] = jitk_arg_ptr(NULL, JITK_DTYPE_NONE);
      continue;
    }
    int mp = memory_pointer_arg(o, &c.args[i]);
    if (mp < 0) goto done;
    if (mp > 0) continue;
    if (convert_arg(&c, o, i, false, kname) != 0) goto done;
    if (c.args[i].kind == JITK_ARG_ARRAY) {
      /* A raw kernel takes `T *`: the first element's address. */
      const DLTensor *tensor = c.args[i].tensor;
      c.args[i] = jitk_arg_tensor_ptr(tensor);
    }
  }
  if (pick_device(&c) != 0) goto done;
  if (finish_stream(&c) != 0) goto done;
  jitk_kernel *kern = rk_on(k, c.device);
  if (kern == NULL) goto done;
  if (narrow_int_args(kern, &c, t, kname) != 0) goto done;
  /* A kernel of a module made with enable_cooperative_groups, or a call
   * that asks, is launched cooperatively (its whole grid co-resident, so
   * grid.sync() works), as CuPy launches it. */
  coop = coop || ((raw_module *)k->module)->enable_cooperative_groups;
  jitk_status st;
  if (coop || pdl || (v[6] != NULL && v[6] != Py_None)) {
    jitk_kernel_launch_config cfg;
    jitk_kernel_launch_config_init(&cfg);
    cfg.cooperative = coop;
    cfg.cluster = cluster;
    cfg.programmatic_dependent_launch = pdl;
    Py_BEGIN_ALLOW_THREADS st =
        jitk_kernel_launch_ex(kern, grid, block, (size_t)shared, c.stream, c.args, (size_t)n, &cfg);
    Py_END_ALLOW_THREADS
  } else {
    Py_BEGIN_ALLOW_THREADS st =
        jitk_kernel_launch(kern, grid, block, (size_t)shared, c.stream, c.args, (size_t)n);
    Py_END_ALLOW_THREADS
  }
  if (st != JITK_OK) {
    raise_status(engines[c.device], st, NULL);
    goto done;
  }
  result = Py_NewRef(Py_None);
done:
  call_release(&c);
  Py_DECREF(t);
  return result;
}

static jitk_kernel *rk_current(raw_kernel *k) {
  find_cupy();
  int dev = count_devices() > 0 ? current_device(LIB_OTHER) : -1;
  if (dev < 0) {
    PyErr_Format(PyExc_RuntimeError, "no CUDA device: %s", no_device_why);
    return NULL;
  }
  return rk_on(k, dev);
}

static PyObject *rk_attributes(raw_kernel *k, void *unused) {
  (void)unused;
  jitk_kernel *kern = rk_current(k);
  if (kern == NULL) return NULL;
  /* rk_current found a device, whose engine holds any error's message. */
  jitk_engine *e = engines[current_device(LIB_OTHER)];
  jitk_kernel_attributes a;
  jitk_status st = jitk_kernel_get_attributes(kern, &a);
  int cache_ca = 0, carveout = -1;
  if (st == JITK_OK) st = jitk_kernel_get_attribute(kern, JITK_KERNEL_CACHE_MODE_CA, &cache_ca);
  if (st == JITK_OK)
    st = jitk_kernel_get_attribute(kern, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, &carveout);
  if (st != JITK_OK) return raise_status(e, st, NULL);
  return Py_BuildValue(
      "{s:i,s:n,s:n,s:n,s:i,s:i,s:i,s:i,s:n,s:i}", "max_threads_per_block", a.max_threads_per_block,
      "shared_size_bytes", (Py_ssize_t)a.static_shared_bytes, "const_size_bytes",
      (Py_ssize_t)a.constant_bytes, "local_size_bytes", (Py_ssize_t)a.local_bytes, "num_regs",
      a.registers, "ptx_version", a.ptx_version, "binary_version", a.binary_version,
      "cache_mode_ca", cache_ca, "max_dynamic_shared_size_bytes",
      (Py_ssize_t)a.max_dynamic_shared_bytes, "preferred_shared_memory_carveout", carveout);
}

static PyObject *rk_attr(raw_kernel *k, void *key) {
  PyObject *all = rk_attributes(k, NULL);
  if (all == NULL) return NULL;
  PyObject *v = PyDict_GetItemString(all, (const char *)key);
  Py_XINCREF(v);
  Py_DECREF(all);
  if (v == NULL) PyErr_SetString(PyExc_AttributeError, (const char *)key);
  return v;
}

/* One of the two settings the kernel keeps for every device it loads on:
 * the most dynamic shared memory a launch may ask for, or the preferred
 * carveout. */
static jitk_status rk_put(jitk_kernel *kern, bool carveout, long long v) {
  return carveout
             ? jitk_kernel_set_attribute(kern, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, (int)v)
             : jitk_kernel_set_max_dynamic_shared(kern, (size_t)v);
}

static jitk_status rk_get(jitk_kernel *kern, bool carveout, long long *v) {
  if (carveout) {
    int c = -1;
    jitk_status st =
        jitk_kernel_get_attribute(kern, JITK_KERNEL_PREFERRED_SHARED_MEMORY_CARVEOUT, &c);
    *v = c;
    return st;
  }
  jitk_kernel_attributes a;
  jitk_status st = jitk_kernel_get_attributes(kern, &a);
  *v = (long long)a.max_dynamic_shared_bytes;
  return st;
}

/* Gives the setting `v` to every device the kernel is loaded on, and
 * through rk_on to the current device and those it loads on later. All
 * take it or none keeps it: where a device refuses it (the driver's limit
 * is per device), the devices that took it get their old value back and
 * the kernel keeps its old setting, as CuPy's kernel keeps its attribute
 * when the driver refuses a value. */
static int rk_apply(raw_kernel *k, bool carveout, long long v) {
  long long before[MAX_DEVICES] = {0};
  for (int d = 0; d < MAX_DEVICES; d++) {
    if (k->per_device[d] == NULL) continue;
    jitk_status st = rk_get(k->per_device[d], carveout, &before[d]);
    if (st != JITK_OK) {
      raise_status(engines[d], st, NULL);
      return -1;
    }
  }
  int done = 0;
  bool ok = true;
  for (; ok && done < MAX_DEVICES; done++) {
    if (k->per_device[done] == NULL) continue;
    jitk_status st = rk_put(k->per_device[done], carveout, v);
    if (st != JITK_OK) {
      raise_status(engines[done], st, NULL);
      ok = false;
    }
  }
  const long long old = carveout ? k->carveout : k->max_dynamic_shared;
  if (ok) {
    if (carveout)
      k->carveout = (int)v;
    else
      k->max_dynamic_shared = v;
    /* The current device loads the kernel now, so that a value it refuses
     * fails here rather than at the next call. */
    if (count_devices() > 0 && rk_current(k) == NULL) ok = false;
  }
  if (ok) return 0;
  if (carveout)
    k->carveout = (int)old;
  else
    k->max_dynamic_shared = old;
  /* The exception is set; taking the value back touches only the driver. */
  for (int d = 0; d < done && d < MAX_DEVICES; d++)
    if (k->per_device[d] != NULL) (void)rk_put(k->per_device[d], carveout, before[d]);
  return -1;
}

static int rk_set_max_dynamic(raw_kernel *k, PyObject *v, void *unused) {
  (void)unused;
  if (v == NULL) {
    PyErr_SetString(PyExc_TypeError, "cannot delete max_dynamic_shared_size_bytes");
    return -1;
  }
  long long bytes = PyLong_AsLongLong(v);
  if (bytes == -1 && PyErr_Occurred()) return -1;
  if (bytes < 0) {
    PyErr_SetString(PyExc_ValueError, "max_dynamic_shared_size_bytes must not be negative");
    return -1;
  }
  return rk_apply(k, false, bytes);
}

/* CuPy's setter of the preferred carveout: -1 (no preference) or a
 * percentage of shared memory against L1, on every device the kernel is
 * loaded on and on those it loads on later. */
static int rk_set_carveout(raw_kernel *k, PyObject *v, void *unused) {
  (void)unused;
  if (v == NULL) {
    PyErr_SetString(PyExc_TypeError, "cannot delete preferred_shared_memory_carveout");
    return -1;
  }
  long percent = PyLong_AsLong(v);
  if (percent == -1 && PyErr_Occurred()) return -1;
  if (percent < -1 || percent > 100) {
    PyErr_Format(PyExc_ValueError,
                 "preferred_shared_memory_carveout must be -1 or a percentage from 0 to 100, not "
                 "%ld",
                 percent);
    return -1;
  }
  return rk_apply(k, true, percent);
}

/* A field of the kernel's module that the kernel shows as its own (code,
 * file_path, options, backend); `field` is its offset in raw_module. */
static PyObject *rk_module_field(raw_kernel *k, void *field) {
  return Py_NewRef(*(PyObject **)((char *)k->module + (size_t)field));
}

static PyObject *rk_get_coop(raw_kernel *k, void *unused) {
  (void)unused;
  return Py_NewRef(py_bool(((raw_module *)k->module)->enable_cooperative_groups));
}

static PyObject *rk_compile(raw_kernel *k, PyObject *args, PyObject *kw) {
  PyObject *r = rm_compile((raw_module *)k->module, args, kw);
  if (r == NULL) return NULL;
  Py_DECREF(r);
  /* The kernel must be there too, as CuPy's compile() checks. */
  static char *kwlist[] = {"log_stream", "arch", NULL};
  PyObject *log = NULL;
  const char *arch = NULL;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "|O$z:compile", kwlist, &log, &arch)) return NULL;
  if (arch == NULL && count_devices() > 0 && rk_current(k) == NULL) return NULL;
  Py_RETURN_NONE;
}

static PyGetSetDef rk_getset[] = {
    {"attributes", (getter)rk_attributes, NULL, "the kernel's attributes, as CuPy names them",
     NULL},
    {"max_threads_per_block", (getter)rk_attr, NULL, NULL, "max_threads_per_block"},
    {"shared_size_bytes", (getter)rk_attr, NULL, NULL, "shared_size_bytes"},
    {"const_size_bytes", (getter)rk_attr, NULL, NULL, "const_size_bytes"},
    {"local_size_bytes", (getter)rk_attr, NULL, NULL, "local_size_bytes"},
    {"num_regs", (getter)rk_attr, NULL, NULL, "num_regs"},
    {"ptx_version", (getter)rk_attr, NULL, NULL, "ptx_version"},
    {"binary_version", (getter)rk_attr, NULL, NULL, "binary_version"},
    {"cache_mode_ca", (getter)rk_attr, NULL, NULL, "cache_mode_ca"},
    {"preferred_shared_memory_carveout", (getter)rk_attr, (setter)rk_set_carveout,
     "the preferred share of shared memory against L1, in percent (-1: none; settable)",
     "preferred_shared_memory_carveout"},
    {"max_dynamic_shared_size_bytes", (getter)rk_attr, (setter)rk_set_max_dynamic,
     "the dynamic shared memory a launch may ask for (settable)", "max_dynamic_shared_size_bytes"},
    {"code", (getter)rk_module_field, NULL, NULL, (void *)offsetof(raw_module, code)},
    {"file_path", (getter)rk_module_field, NULL,
     "the file of the kernel's module (None for code), as CuPy names it",
     (void *)offsetof(raw_module, path)},
    {"options", (getter)rk_module_field, NULL, NULL, (void *)offsetof(raw_module, options)},
    {"backend", (getter)rk_module_field, NULL, NULL, (void *)offsetof(raw_module, backend)},
    {"enable_cooperative_groups", (getter)rk_get_coop, NULL, NULL, NULL},
    {NULL, NULL, NULL, NULL, NULL}};

static PyMemberDef rk_members[] = {
    {"name", T_OBJECT_EX, offsetof(raw_kernel, name), READONLY, NULL},
    {"__name__", T_OBJECT_EX, offsetof(raw_kernel, name), READONLY,
     "the kernel's name, as CuPy sets it"},
    {NULL, 0, 0, 0, NULL}};

/* __reduce__: see "Pickling". A kernel is its module's, made again
 * with get_function: a RawKernel(code, name) holds a module of its own
 * code, which pickles as any other. */
static PyObject *rk_reduce(raw_kernel *k, PyObject *unused) {
  (void)unused;
  return Py_BuildValue("O(OO)", rebuild_kernel_fn, k->module, k->name);
}

static PyMethodDef rk_methods[] = {
    {"__reduce__", (PyCFunction)rk_reduce, METH_NOARGS, "pickles as its module and its name"},
    {"compile", (PyCFunction)(void (*)(void))rk_compile, METH_VARARGS | METH_KEYWORDS,
     "compile(log_stream=None, *, arch=None): compiles now."},
    {NULL, NULL, 0, NULL}};

static PyType_Slot rk_slots[] = {
    {Py_tp_new, rk_new},
    {Py_tp_dealloc, rk_dealloc},
    {Py_tp_call, rk_call},
    {Py_tp_getset, rk_getset},
    {Py_tp_members, rk_members},
    {Py_tp_methods, rk_methods},
    {Py_tp_doc,
     "RawKernel(code, name, options=(), backend='nvrtc', *, translate_cucomplex=False, "
     "enable_cooperative_groups=False, jitify=False)\n\nA kernel of CUDA source, as "
     "CuPy's RawKernel: k(grid, block, args, shared_mem=0, stream=None, "
     "enable_cooperative_groups=False, *, cluster=None, programmatic_dependent_launch=False); "
     "cluster, a thread-block cluster's shape (an int or up to 3 ints), and programmatic "
     "dependent launch are cuda.core's options."},
    {0, NULL}};

static PyType_Spec rk_spec = {"jitk.RawKernel", sizeof(raw_kernel), 0,
                              Py_TPFLAGS_DEFAULT | Py_TPFLAGS_BASETYPE, rk_slots};

/* ------------------------------------------------------------------ */
/* Matmul plans (the Python side, _matmul.py, builds descriptions)    */
/* ------------------------------------------------------------------ */

/* _describe(array) -> (device, dtype name, shape, strides in elements,
 * library): what jitk reads from any GPU array, for the Python layer that
 * plans matmuls. */
static PyObject *py_describe(PyObject *self, PyObject *o) {
  (void)self;
  pyarr a;
  int dev = -1;
  int lib = lib_of(o);
  int r = read_array(o, lib, NULL, &a, &dev, false, "the array");
  if (r <= 0) {
    release_capsule(a.hold);
    if (r == 0) {
      char tn[128];
      type_name(o, tn, sizeof tn);
      PyErr_Format(PyExc_TypeError, "%s is not a GPU array", tn);
    }
    return NULL;
  }
  /* An empty array of the interface whose pointer is 0 names no device: it
   * is on the one a call would run on, the current one (as pick_device
   * settles it for kernels). */
  if (dev < 0) {
    find_cupy();
    dev = current_device(lib);
  }
  PyObject *shape = PyTuple_New(a.t.ndim), *strides = PyTuple_New(a.t.ndim);
  for (int d = 0; shape && strides && d < a.t.ndim; d++) {
    PyTuple_SetItem(shape, d, PyLong_FromLongLong(a.shape[d]));
    PyTuple_SetItem(strides, d, PyLong_FromLongLong(a.strides[d]));
  }
  release_capsule(a.hold);
  if (shape == NULL || strides == NULL) {
    Py_XDECREF(shape);
    Py_XDECREF(strides);
    return NULL;
  }
  static const char *libs[] = {"other", "cupy", "torch"};
  return Py_BuildValue("(isNNsKzn)", dev, dtype_name(a.dtype), shape, strides, libs[lib],
                       (unsigned long long)(uintptr_t)((const char *)a.t.data + a.t.byte_offset),
                       a.not_writable, (Py_ssize_t)dtype_size(a.dtype));
}

/* _empty(like, shape, dtype_name): a new array of the library `like`
 * belongs to, on its device. */
static PyObject *py_empty(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *like, *shape;
  const char *dtname;
  if (!PyArg_ParseTuple(args, "OOs:_empty", &like, &shape, &dtname)) return NULL;
  jitk_output_spec sp;
  memset(&sp, 0, sizeof sp);
  if (jitk_dtype_from_name(dtname, &sp.dtype) != JITK_OK) {
    PyErr_Format(PyExc_ValueError, "no dtype %s", dtname);
    return NULL;
  }
  PyObject *t = PySequence_Tuple(shape);
  if (t == NULL) return NULL;
  sp.ndim = (int)PyTuple_Size(t);
  if (sp.ndim > JITK_MAX_NDIM) {
    Py_DECREF(t);
    PyErr_SetString(PyExc_ValueError, "too many dimensions");
    return NULL;
  }
  for (int d = 0; d < sp.ndim; d++) sp.shape[d] = PyLong_AsLongLong(PyTuple_GetItem(t, d));
  Py_DECREF(t);
  if (PyErr_Occurred()) return NULL;
  pyarr a;
  int dev = 0, lib = lib_of(like);
  int r = read_array(like, lib, NULL, &a, &dev, false, "the array");
  release_capsule(a.hold);
  if (r < 0) return NULL;
  return allocate_output(lib, dev, &sp);
}

/* The most outputs and reductions a Python plan may have (the C library's
 * limit is larger). */
enum { JK_PY_MM_EXTRA = 8 };

typedef struct mm_plan {
  PyObject_HEAD jitk_matmul *plan;
  int device; /* -1 on a compile-only engine */
  int num_extra;
  int num_outputs, num_reductions; /* besides D, and of the epilogue's values */
  int scales;                      /* FP8: bits 0-3 for a_scale, b_scale, d_scale, amax_d */
  jitk_engine *engine;
} mm_plan;

static int dtype_arg(const char *name, jitk_dtype *out) {
  if (jitk_dtype_from_name(name, out) != JITK_OK) {
    PyErr_Format(PyExc_ValueError, "no dtype %s", name);
    return -1;
  }
  return 0;
}

static int ints4(PyObject *seq, long long v[4], const char *what) {
  PyObject *t = PySequence_Tuple(seq);
  if (t == NULL || PyTuple_Size(t) != 4) {
    Py_XDECREF(t);
    PyErr_Format(PyExc_ValueError, "%s must hold 4 ints (A, B, C, D)", what);
    return -1;
  }
  for (int i = 0; i < 4; i++) v[i] = PyLong_AsLongLong(PyTuple_GetItem(t, i));
  Py_DECREF(t);
  return PyErr_Occurred() ? -1 : 0;
}

/* _MatmulPlan(device, m, n, k, batch, a_dtype, b_dtype, c_dtype, d_dtype,
 * compute, orders, lds, strides, has_c, alpha, beta, epilogue,
 * epilogue_params, preamble, num_extra, arch=None): the C API's plan. */
static PyObject *mm_new(PyTypeObject *type, PyObject *args, PyObject *kw) {
  static char *kwlist[] = {
      "device",   "m",         "n",       "k",       "batch",      "a_dtype",
      "b_dtype",  "c_dtype",   "d_dtype", "compute", "orders",     "lds",
      "strides",  "has_c",     "alpha",   "beta",    "epilogue",   "epilogue_params",
      "preamble", "num_extra", "arch",    "outputs", "reductions", "scales",
      NULL};
  int device, compute, has_c, num_extra;
  long long m, n, k, batch;
  const char *ad, *bd, *cd, *dd, *epi, *epp, *pre, *arch = NULL;
  PyObject *orders, *lds, *strides, *outputs = NULL, *reductions = NULL;
  double alpha, beta;
  int scales = 0;
  if (!PyArg_ParseTupleAndKeywords(args, kw, "iLLLLsszsiOOOpddzzzi|zOOi:_MatmulPlan", kwlist,
                                   &device, &m, &n, &k, &batch, &ad, &bd, &cd, &dd, &compute,
                                   &orders, &lds, &strides, &has_c, &alpha, &beta, &epi, &epp, &pre,
                                   &num_extra, &arch, &outputs, &reductions, &scales))
    return NULL;
  /* outputs: (name, dtype, expr) each, packed in D's order; reductions:
   * (name, dtype, expr, op, axis) each, op and axis the C library's
   * numbers. The strings belong to the tuples, alive through the create. */
  jitk_matmul_output outs[JK_PY_MM_EXTRA];
  jitk_matmul_reduction reds[JK_PY_MM_EXTRA];
  Py_ssize_t nouts = outputs != NULL && outputs != Py_None ? PySequence_Size(outputs) : 0,
             nreds = reductions != NULL && reductions != Py_None ? PySequence_Size(reductions) : 0;
  if (nouts < 0 || nreds < 0) return NULL;
  if (nouts > JK_PY_MM_EXTRA || nreds > JK_PY_MM_EXTRA) {
    PyErr_Format(PyExc_ValueError, "at most %d outputs and %d reductions", JK_PY_MM_EXTRA,
                 JK_PY_MM_EXTRA);
    return NULL;
  }
  for (Py_ssize_t i = 0; i < nouts; i++) {
    PyObject *t = PySequence_GetItem(outputs, i);
    const char *name, *dt, *expr;
    int ok = t != NULL && PyArg_ParseTuple(t, "sss:output", &name, &dt, &expr) &&
             dtype_arg(dt, &outs[i].dtype) == 0;
    Py_XDECREF(t); /* the sequence keeps the tuple and its strings */
    if (!ok) return NULL;
    outs[i].name = name;
    outs[i].expr = expr;
    outs[i].ld = outs[i].stride = 0;
  }
  for (Py_ssize_t i = 0; i < nreds; i++) {
    PyObject *t = PySequence_GetItem(reductions, i);
    const char *name, *dt, *expr;
    int op, axis;
    int ok = t != NULL && PyArg_ParseTuple(t, "sssii:reduction", &name, &dt, &expr, &op, &axis) &&
             dtype_arg(dt, &reds[i].dtype) == 0;
    Py_XDECREF(t);
    if (!ok) return NULL;
    reds[i].name = name;
    reds[i].expr = expr;
    reds[i].op = (jitk_reduce_op)op;
    reds[i].axis = (jitk_reduce_axis)axis;
  }
  jitk_matmul_desc desc;
  jitk_matmul_desc_init(&desc);
  desc.m = m;
  desc.n = n;
  desc.k = k;
  desc.batch = batch;
  long long o[4], l[4], st4[4];
  if (dtype_arg(ad, &desc.a_dtype) != 0 || dtype_arg(bd, &desc.b_dtype) != 0 ||
      (cd != NULL && dtype_arg(cd, &desc.c_dtype) != 0) || dtype_arg(dd, &desc.d_dtype) != 0 ||
      ints4(orders, o, "orders") != 0 || ints4(lds, l, "lds") != 0 ||
      ints4(strides, st4, "strides") != 0)
    return NULL;
  desc.compute = (jitk_compute)compute;
  desc.a_order = (jitk_order)o[0];
  desc.b_order = (jitk_order)o[1];
  desc.c_order = (jitk_order)o[2];
  desc.d_order = (jitk_order)o[3];
  desc.lda = l[0];
  desc.ldb = l[1];
  desc.ldc = l[2];
  desc.ldd = l[3];
  desc.stride_a = st4[0];
  desc.stride_b = st4[1];
  desc.stride_c = st4[2];
  desc.stride_d = st4[3];
  desc.has_c = has_c;
  desc.alpha = alpha;
  desc.beta = beta;
  desc.epilogue = epi;
  desc.epilogue_params = epp;
  desc.preamble = pre;
  desc.outputs = outs;
  desc.num_outputs = (size_t)nouts;
  desc.reductions = reds;
  desc.num_reductions = (size_t)nreds;
  desc.has_a_scale = scales & 1;
  desc.has_b_scale = (scales >> 1) & 1;
  desc.has_d_scale = (scales >> 2) & 1;
  desc.has_amax_d = (scales >> 3) & 1;
  jitk_engine *e = arch != NULL || device < 0 ? arch_engine_for(arch) : device_engine(device);
  if (e == NULL) return NULL;
  allocfunc alloc = (allocfunc)PyType_GetSlot(type, Py_tp_alloc);
  mm_plan *p = (mm_plan *)alloc(type, 0);
  if (p == NULL) return NULL;
  p->device = arch != NULL ? -1 : device;
  p->num_extra = num_extra;
  p->num_outputs = (int)nouts;
  p->num_reductions = (int)nreds;
  p->scales = scales;
  p->engine = e;
  jitk_status s;
  Py_BEGIN_ALLOW_THREADS s = jitk_matmul_create(e, &desc, &p->plan);
  Py_END_ALLOW_THREADS if (s != JITK_OK) {
    Py_DECREF(p);
    return raise_status(e, s, NULL);
  }
  return (PyObject *)p;
}

static void mm_dealloc(mm_plan *p) {
  jitk_matmul_destroy(p->plan);
  free_instance((PyObject *)p);
}

/* The device pointer of an operand (any library), or NULL for None. */
static int operand_ptr(PyObject *o, call *c, const void **ptr, const char *what) {
  *ptr = NULL;
  if (o == Py_None) return 0;
  pyarr *a = &c->arrs[c->narr];
  int dev = -1;
  int r = read_array(o, lib_of(o), c->stream_given ? c->stream : NULL, a, &dev, false, what);
  c->narr++;
  if (r <= 0) {
    if (r == 0) PyErr_Format(PyExc_TypeError, "%s is not a GPU array", what);
    return -1;
  }
  /* Where an array without elements lies does not matter: nothing of it
   * is read or written (and one of the interface with a null pointer names
   * no device). */
  bool empty = false;
  for (int i = 0; i < a->t.ndim; i++) empty = empty || a->t.shape[i] == 0;
  if (!empty && c->device < 0) {
    c->device = dev;
  } else if (!empty && dev != c->device) {
    PyErr_Format(PyExc_ValueError, "%s is on device %d, the operands before it on device %d", what,
                 dev, c->device);
    return -1;
  }
  if (c->lib == LIB_OTHER) c->lib = lib_of(o);
  *ptr = (const char *)a->t.data + a->t.byte_offset;
  return 0;
}

/* execute(a, b, c, d, extra, stream, tune) */
/* execute(a, b, c, d, extra, stream, alpha=None, beta=None, outputs=None,
 * reductions=None, scales=None) and autotune(a, b, c, d, extra, stream):
 * alpha and beta, when given, are this execution's (the C library's
 * jitk_matmul_operands), which compile nothing; outputs and reductions the
 * arrays of the plan's, in its order; scales the arrays of an FP8 plan's
 * a_scale, b_scale, d_scale and amax_d (None where the plan has none). */
static PyObject *mm_run(mm_plan *p, PyObject *args, bool tune) {
  PyObject *a, *b, *cc, *d, *extra, *stream_o, *alpha_o = Py_None, *beta_o = Py_None;
  PyObject *outs_o = Py_None, *reds_o = Py_None, *scales_o = Py_None;
  if (!PyArg_ParseTuple(args, "OOOOOO|OOOOO", &a, &b, &cc, &d, &extra, &stream_o, &alpha_o, &beta_o,
                        &outs_o, &reds_o, &scales_o))
    return NULL;
  double alpha = 0, beta = 0;
  if (alpha_o != Py_None && (alpha = PyFloat_AsDouble(alpha_o)) == -1.0 && PyErr_Occurred())
    return NULL;
  if (beta_o != Py_None && (beta = PyFloat_AsDouble(beta_o)) == -1.0 && PyErr_Occurred())
    return NULL;
  if (p->device < 0) {
    PyErr_SetString(PyExc_RuntimeError, "a plan made for a target without a GPU cannot run");
    return NULL;
  }
  call c;
  PyObject *result = NULL;
  const void *pa, *pb, *pc, *pd;
  PyObject *ex = NULL;
  if (call_init(&c, 0, stream_o, false) != 0) goto done;
  if (operand_ptr(a, &c, &pa, "A") != 0 || operand_ptr(b, &c, &pb, "B") != 0 ||
      operand_ptr(cc, &c, &pc, "C") != 0 || operand_ptr(d, &c, &pd, "D") != 0)
    goto done;
  /* The arrays of the plan's outputs and reductions, in its order (made
   * by the package, checked there). */
  void *op[JK_PY_MM_EXTRA], *rp[JK_PY_MM_EXTRA];
  PyObject *const lists[2] = {outs_o, reds_o};
  void **const ptrs[2] = {op, rp};
  const int counts[2] = {p->num_outputs, p->num_reductions};
  for (int w = 0; w < 2; w++) {
    Py_ssize_t got = lists[w] == Py_None ? 0 : PySequence_Size(lists[w]);
    if (got < 0) goto done;
    if (got != counts[w]) {
      PyErr_Format(PyExc_TypeError, "the plan has %d %s, not %zd", counts[w],
                   w ? "reductions" : "outputs", got);
      goto done;
    }
    for (Py_ssize_t i = 0; i < got; i++) {
      PyObject *x = PySequence_GetItem(lists[w], i);
      const void *ptr = NULL;
      int r = x != NULL && c.narr < MAX_ARGS
                  ? operand_ptr(x, &c, &ptr, w ? "a reduction" : "an output")
                  : -1;
      Py_XDECREF(x);
      if (r != 0) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "too many arrays");
        goto done;
      }
      ptrs[w][i] = (void *)ptr;
    }
  }
  const void *sp[4] = {NULL, NULL, NULL, NULL};
  if (scales_o != Py_None) {
    static const char *const what[4] = {"a_scale", "b_scale", "d_scale", "amax_d"};
    if (PySequence_Size(scales_o) != 4) {
      if (!PyErr_Occurred()) PyErr_SetString(PyExc_TypeError, "scales: four arrays or None");
      goto done;
    }
    for (int i = 0; i < 4; i++) {
      PyObject *x = PySequence_GetItem(scales_o, i);
      int r = x != NULL ? operand_ptr(x, &c, &sp[i], what[i]) : -1;
      Py_XDECREF(x);
      if (r != 0) goto done;
    }
  }
  if (c.device < 0) c.device = p->device; /* every operand is empty */
  if (c.device != p->device) {
    PyErr_Format(PyExc_ValueError, "the operands are on device %d, the plan is for device %d",
                 c.device, p->device);
    goto done;
  }
  ex = PySequence_Tuple(extra);
  if (ex == NULL) goto done;
  if (PyTuple_Size(ex) != p->num_extra) {
    PyErr_Format(PyExc_TypeError, "the epilogue takes %d inputs, not %zd", p->num_extra,
                 PyTuple_Size(ex));
    goto done;
  }
  jitk_arg xa[MAX_ARGS / 2];
  int nx = (int)PyTuple_Size(ex);
  if (nx > MAX_ARGS / 2) {
    PyErr_SetString(PyExc_ValueError, "too many epilogue inputs");
    goto done;
  }
  c.n = nx;
  for (int i = 0; i < nx; i++) {
    if (convert_arg(&c, PyTuple_GetItem(ex, i), i, false, "epilogue") != 0) goto done;
    if (c.args[i].kind == JITK_ARG_ARRAY) c.args[i] = jitk_arg_tensor_ptr(c.args[i].tensor);
    xa[i] = c.args[i];
  }
  if (finish_stream(&c) != 0) goto done;
  jitk_matmul_operands o;
  jitk_matmul_operands_init(&o);
  o.a = pa;
  o.b = pb;
  o.c = pc;
  o.d = (void *)pd;
  o.extra = xa;
  o.num_extra = (size_t)nx;
  o.alpha = alpha_o != Py_None ? &alpha : NULL;
  o.beta = beta_o != Py_None ? &beta : NULL;
  o.outputs = op;
  o.reductions = rp;
  o.a_scale = sp[0];
  o.b_scale = sp[1];
  o.d_scale = sp[2];
  o.amax_d = (float *)sp[3];
  jitk_status st;
  Py_BEGIN_ALLOW_THREADS st =
      tune ? jitk_matmul_autotune(p->plan, c.stream, pa, pb, pc, (void *)pd, xa, (size_t)nx)
           : jitk_matmul_execute_ex(p->plan, c.stream, &o);
  Py_END_ALLOW_THREADS if (st != JITK_OK) {
    raise_status(p->engine, st, NULL);
    goto done;
  }
  result = Py_NewRef(Py_None);
done:
  Py_XDECREF(ex);
  call_release(&c);
  return result;
}

static PyObject *mm_execute(mm_plan *p, PyObject *args) { return mm_run(p, args, false); }
static PyObject *mm_autotune(mm_plan *p, PyObject *args) { return mm_run(p, args, true); }

static PyObject *mm_describe(mm_plan *p, PyObject *unused) {
  (void)unused;
  char buf[1024];
  jitk_status st = jitk_matmul_describe(p->plan, buf, sizeof buf);
  if (st != JITK_OK) return raise_status(p->engine, st, NULL);
  return PyUnicode_FromString(buf);
}

static PyObject *mm_source(mm_plan *p, PyObject *unused) {
  (void)unused;
  const char *src = NULL;
  jitk_status st = jitk_matmul_source(p->plan, &src);
  if (st != JITK_OK) return raise_status(p->engine, st, NULL);
  return PyUnicode_FromString(src);
}

static PyMethodDef mm_methods[] = {{"execute", (PyCFunction)mm_execute, METH_VARARGS, NULL},
                                   {"autotune", (PyCFunction)mm_autotune, METH_VARARGS, NULL},
                                   {"describe", (PyCFunction)mm_describe, METH_NOARGS, NULL},
                                   {"source", (PyCFunction)mm_source, METH_NOARGS, NULL},
                                   {NULL, NULL, 0, NULL}};

static PyType_Slot mm_slots[] = {{Py_tp_new, mm_new},
                                 {Py_tp_dealloc, mm_dealloc},
                                 {Py_tp_methods, mm_methods},
                                 {Py_tp_doc, "The C API's matmul plan (see jitk.MatmulPlan)."},
                                 {0, NULL}};

static PyType_Spec mm_spec = {"jitk._MatmulPlan", sizeof(mm_plan), 0, Py_TPFLAGS_DEFAULT, mm_slots};

/* ------------------------------------------------------------------ */
/* Module functions                                                   */
/* ------------------------------------------------------------------ */

static PyObject *py_device_count(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  return PyLong_FromLong(count_devices());
}

static PyObject *stats_dict(const jitk_cache_stats *s) {
  return Py_BuildValue(
      "{s:K,s:K,s:K,s:K,s:d,s:K,s:K,s:K,s:K,s:K,s:L}", "memory_hits",
      (unsigned long long)s->memory_hits, "disk_hits", (unsigned long long)s->disk_hits, "misses",
      (unsigned long long)s->misses, "compiles", (unsigned long long)s->compiles, "compile_ms",
      s->compile_ms, "corrupt", (unsigned long long)s->corrupt, "evictions",
      (unsigned long long)s->evictions, "disk_errors", (unsigned long long)s->disk_errors,
      "entries", (unsigned long long)s->entries, "bytes", (unsigned long long)s->bytes, "max_bytes",
      (long long)s->max_bytes);
}

/* cache_stats(): this process's counts (summed over its engines) and the
 * disk store's, which every process using it adds to. */
static PyObject *py_cache_stats(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  jitk_cache_stats mine, sum, all;
  memset(&sum, 0, sizeof sum);
  jitk_engine *any = NULL;
  jitk_engine *list[MAX_DEVICES + 16];
  int n = 0;
  for (int d = 0; d < MAX_DEVICES; d++)
    if (engines[d] != NULL) list[n++] = engines[d];
  for (size_t i = 0; i < sizeof arch_engines / sizeof arch_engines[0]; i++)
    if (arch_engines[i].engine != NULL) list[n++] = arch_engines[i].engine;
  for (int i = 0; i < n; i++) {
    if (jitk_cache_get_stats(list[i], &mine, NULL) != JITK_OK) continue;
    sum.memory_hits += mine.memory_hits;
    sum.disk_hits += mine.disk_hits;
    sum.misses += mine.misses;
    sum.compiles += mine.compiles;
    sum.compile_ms += mine.compile_ms;
    sum.corrupt += mine.corrupt;
    sum.evictions += mine.evictions;
    sum.disk_errors += mine.disk_errors;
    sum.max_bytes = mine.max_bytes;
    if (any == NULL) any = list[i];
  }
  if (any == NULL && (any = parse_engine()) == NULL) return NULL;
  PyObject *process = stats_dict(&sum);
  if (process == NULL) return NULL;
  PyObject *disk = NULL;
  if (jitk_cache_get_stats(any, NULL, &all) == JITK_OK) {
    disk = stats_dict(&all);
  } else {
    disk = Py_NewRef(Py_None);
  }
  const char *dir = NULL, *db = NULL, *state = NULL;
  jitk_cache_location(any, &dir, &db, &state);
  PyObject *r = Py_BuildValue("{s:N,s:N,s:z,s:z,s:z}", "process", process, "disk", disk, "folder",
                              dir, "database", db, "state", state);
  return r;
}

static PyObject *py_nvrtc_version(PyObject *self, PyObject *unused) {
  (void)self;
  (void)unused;
  int major = 0, minor = 0;
  jitk_status st = jitk_nvrtc_version(&major, &minor);
  if (st != JITK_OK) return raise_status(NULL, st, NULL);
  return Py_BuildValue("(ii)", major, minor);
}

static PyObject *py_device_arch(PyObject *self, PyObject *args) {
  (void)self;
  int device = 0;
  if (!PyArg_ParseTuple(args, "|i:device_arch", &device)) return NULL;
  jitk_engine *e = device_engine(device);
  if (e == NULL) return NULL;
  const char *arch = NULL;
  jitk_engine_arch(e, &arch);
  return PyUnicode_FromString(arch ? arch : "");
}

/* _rebuild(cls, kwargs): cls(**kwargs), a pickled kernel or module made
 * again (see "Pickling"). A module's jitify=True is set on the new module
 * rather than given to its constructor, which would warn again. */
static PyObject *py_rebuild(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *cls, *kwargs;
  if (!PyArg_ParseTuple(args, "OO!:_rebuild", &cls, &PyDict_Type, &kwargs)) return NULL;
  PyObject *none = PyTuple_New(0), *kw = PyDict_Copy(kwargs);
  int jitify = 0;
  PyObject *given = kw != NULL ? PyDict_GetItemString(kw, "jitify") : NULL;
  if (given != NULL) {
    jitify = PyObject_IsTrue(given);
    if (jitify < 0 || PyDict_DelItemString(kw, "jitify") != 0) Py_CLEAR(kw);
  }
  PyObject *r = none != NULL && kw != NULL ? PyObject_Call(cls, none, kw) : NULL;
  Py_XDECREF(none);
  Py_XDECREF(kw);
  if (r != NULL && jitify && PyObject_TypeCheck(r, (PyTypeObject *)raw_module_type))
    ((raw_module *)r)->jitify = 1;
  return r;
}

/* _rebuild_kernel(module, name): module.get_function(name). */
static PyObject *py_rebuild_kernel(PyObject *self, PyObject *args) {
  (void)self;
  PyObject *module, *name;
  if (!PyArg_ParseTuple(args, "O!U:_rebuild_kernel", raw_module_type, &module, &name)) return NULL;
  return rm_get_function((raw_module *)module, name);
}

static PyMethodDef module_methods[] = {
    {"_rebuild", py_rebuild, METH_VARARGS, "_rebuild(cls, kwargs): cls(**kwargs), for pickle"},
    {"_rebuild_kernel", py_rebuild_kernel, METH_VARARGS,
     "_rebuild_kernel(module, name): module.get_function(name), for pickle"},
    {"device_count", py_device_count, METH_NOARGS,
     "device_count() -> int: CUDA devices the driver sees; 0 without a driver."},
    {"cache_stats", py_cache_stats, METH_NOARGS,
     "cache_stats() -> dict: the kernel cache's counts for this process and for the disk "
     "store shared with the C library (the same JITK_CACHE_* variables)."},
    {"nvrtc_version", py_nvrtc_version, METH_NOARGS, "nvrtc_version() -> (major, minor)"},
    {"_describe", py_describe, METH_O,
     "_describe(array) -> (device, dtype, shape, strides, lib, address, why not writable, "
     "itemsize)"},
    {"_empty", py_empty, METH_VARARGS, "_empty(like, shape, dtype): a new array like `like`'s"},
    {"device_arch", py_device_arch, METH_VARARGS,
     "device_arch(device=0) -> str: the target jitk compiles for on that device ('sm_90')."},
    {NULL, NULL, 0, NULL}};

static struct PyModuleDef module_def = {PyModuleDef_HEAD_INIT,
                                        "_jitk",
                                        "The C extension of the jitk package.",
                                        -1,
                                        module_methods,
                                        NULL,
                                        NULL,
                                        NULL,
                                        NULL};

static int intern_names(void) {
  struct {
    PyObject **slot;
    const char *text;
  } names[] = {{&s_data, "data"},
               {&s_ptr, "ptr"},
               {&s_device_id, "device_id"},
               {&s_shape, "shape"},
               {&s_strides, "strides"},
               {&s_c_contiguous, "_c_contiguous"},
               {&s_dtype, "dtype"},
               {&s_kind, "kind"},
               {&s_itemsize, "itemsize"},
               {&s_name, "name"},
               {&s_is_cuda, "is_cuda"},
               {&s_data_ptr, "data_ptr"},
               {&s_stride, "stride"},
               {&s_get_device, "get_device"},
               {&s_dlpack, "__dlpack__"},
               {&s_dlpack_device, "__dlpack_device__"},
               {&s_cai, "__cuda_array_interface__"},
               {&s_cuda_stream_proto, "__cuda_stream__"},
               {&s_cuda_stream, "cuda_stream"},
               {&s_item, "item"},
               {&s_stream, "stream"},
               {&s_max_version, "max_version"},
               {&s_str, "str"},
               {&s_empty, "empty"},
               {&s_device, "device"},
               {&s_dtype_kw, "dtype"},
               {&s_typestr, "typestr"},
               {&s_version, "version"},
               {&s_mask, "mask"},
               {&s_shape_key, "shape"},
               {&s_strides_key, "strides"},
               {&s_data_key, "data"},
               {&s_stream_key, "stream"},
               {&s_real, "real"},
               {&s_imag, "imag"},
               {&s_cached_codes, "_cached_codes"}};
  for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
    *names[i].slot = PyUnicode_InternFromString(names[i].text);
    if (*names[i].slot == NULL) return -1;
  }
  return 0;
}

PyMODINIT_FUNC PyInit__jitk(void) {
  if (intern_names() != 0) return NULL;
  PyObject *m = PyModule_Create(&module_def);
  if (m == NULL) return NULL;
  JitkError = PyErr_NewExceptionWithDoc(
      "jitk.JitkError", "A failure of the jitk library (its message says which and why).",
      PyExc_RuntimeError, NULL);
  CompileError = PyErr_NewExceptionWithDoc(
      "jitk.CompileError",
      "NVRTC refused a kernel; the message (and .log) holds its log with the error at the "
      "user's own line, .source the source it was given, .options its options and .name the "
      "kernel's name.",
      JitkError, NULL);
  PerformanceWarning = PyErr_NewExceptionWithDoc(
      "jitk.PerformanceWarning",
      "A call that works but costs more than it could, as CuPy's PerformanceWarning: arrays of "
      "another device than the call's, read through peer access.",
      PyExc_RuntimeWarning, NULL);
  if (JitkError == NULL || CompileError == NULL || PerformanceWarning == NULL) goto fail;
  if (PyModule_AddObject(m, "JitkError", Py_NewRef(JitkError)) != 0 ||
      PyModule_AddObject(m, "CompileError", Py_NewRef(CompileError)) != 0 ||
      PyModule_AddObject(m, "PerformanceWarning", Py_NewRef(PerformanceWarning)) != 0)
    goto fail;
  PyObject *ew = PyType_FromSpec(&ew_spec);
  PyObject *red = PyType_FromSpec(&red_spec);
  raw_module_type = (PyTypeObject *)PyType_FromSpec(&rm_spec);
  raw_kernel_type = (PyTypeObject *)PyType_FromSpec(&rk_spec);
  if (ew == NULL || red == NULL || raw_module_type == NULL || raw_kernel_type == NULL) goto fail;
  if (PyModule_AddObject(m, "ElementwiseKernel", ew) != 0 ||
      PyModule_AddObject(m, "ReductionKernel", red) != 0 ||
      PyModule_AddObject(m, "RawModule", Py_NewRef((PyObject *)raw_module_type)) != 0 ||
      PyModule_AddObject(m, "RawKernel", Py_NewRef((PyObject *)raw_kernel_type)) != 0)
    goto fail;
  PyObject *mm = PyType_FromSpec(&mm_spec);
  if (mm == NULL || PyModule_AddObject(m, "_MatmulPlan", mm) != 0) goto fail;
  if (PyModule_AddStringConstant(m, "library_version", jitk_version()) != 0) goto fail;
  rebuild_fn = PyObject_GetAttrString(m, "_rebuild");
  rebuild_kernel_fn = PyObject_GetAttrString(m, "_rebuild_kernel");
  if (rebuild_fn == NULL || rebuild_kernel_fn == NULL) goto fail;
  return m;
fail:
  Py_DECREF(m);
  return NULL;
}
