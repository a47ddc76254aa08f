/*
 * The jitk command: `jitk doctor` describes the machine, `jitk compile`
 * compiles CUDA source without needing a GPU. Exit status: 0 success, 1 a
 * failure jitk reported, 2 a usage error.
 */
#include <jitk/jitk.h>

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define EXIT_USAGE 2

static const char *prog = "jitk";

static void usage_main(FILE *out) {
  fprintf(out,
          "usage: %s <command> [options]\n"
          "\n"
          "commands:\n"
          "  doctor    report the driver, NVRTC, CUDA headers and devices\n"
          "  compile   compile a CUDA source file (or an elementwise or reduction\n"
          "            kernel: `jitk compile elementwise --help`, `jitk compile\n"
          "            reduction --help`) to a cubin or PTX, or plan a matmul\n"
          "            (`jitk compile matmul --help`)\n"
          "  cache     inspect and maintain the kernel cache\n"
          "  version   print jitk's version\n"
          "  help      this text; `jitk <command> --help` for a command\n",
          prog);
}

static void usage_doctor(FILE *out) {
  fprintf(out,
          "usage: %s doctor\n"
          "\n"
          "Reports whether the CUDA driver loads and its version, NVRTC's\n"
          "version and targets, where the CUDA headers are, and each device\n"
          "with its compute capability and memory. Exits 0 without a driver\n"
          "too: that is a valid machine for compiling.\n",
          prog);
}

static void usage_compile(FILE *out) {
  fprintf(out,
          "usage: %s compile FILE.cu [options]\n"
          "\n"
          "Compiles FILE.cu with NVRTC and writes the cubin (or PTX), then\n"
          "prints each kernel's registers, shared memory, stack and spills.\n"
          "No GPU is needed.\n"
          "\n"
          "options:\n"
          "  --arch ARCH              target: sm_90, sm_90a, compute_90 (default:\n"
          "                           the GPU's, or sm_90 without one)\n"
          "  --ptx                    emit PTX (compute_XY of the target)\n"
          "  --name-expression EXPR   a kernel to instantiate and report, such\n"
          "                           as 'scale<float>'; repeatable\n"
          "  -o OUT                   output file (default: FILE.cubin or FILE.ptx)\n"
          "  -DNAME[=VALUE], -IDIR    passed to NVRTC\n"
          "  --option OPT             any other NVRTC option; repeatable\n"
          "  --no-cache               compile even if the kernel cache has it, and\n"
          "                           store nothing\n",
          prog);
}

static char *read_file(const char *path, size_t *size) {
  FILE *f = fopen(path, "rb");
  if (f == NULL) return NULL;
  size_t cap = 1 << 16, len = 0;
  char *buf = malloc(cap);
  size_t n;
  while (buf != NULL && (n = fread(buf + len, 1, cap - len - 1, f)) > 0) {
    len += n;
    if (cap - len - 1 == 0) {
      char *nb = realloc(buf, cap * 2);
      if (nb == NULL) {
        free(buf);
        buf = NULL;
        break;
      }
      buf = nb;
      cap *= 2;
    }
  }
  int err = ferror(f);
  fclose(f);
  if (buf == NULL || err) {
    free(buf);
    errno = err ? EIO : ENOMEM;
    return NULL;
  }
  buf[len] = '\0';
  *size = len;
  return buf;
}

static int fail(jitk_engine *e, jitk_status st, const char *what) {
  fprintf(stderr, "%s: %s: %s (%s)\n", prog, what, jitk_errmsg(e), jitk_errname(st));
  return 1;
}

static void human_bytes(size_t bytes, char *out, size_t n) {
  if (bytes >= (size_t)1 << 30)
    snprintf(out, n, "%.1f GiB", (double)bytes / (double)(1u << 30));
  else if (bytes >= (size_t)1 << 20)
    snprintf(out, n, "%.1f MiB", (double)bytes / (double)(1u << 20));
  else if (bytes >= 1024)
    snprintf(out, n, "%.1f KiB", (double)bytes / 1024.0);
  else
    snprintf(out, n, "%zu B", bytes);
}

static int cmd_doctor(int argc, char **argv) {
  for (int i = 0; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage_doctor(stdout);
      return 0;
    }
    fprintf(stderr, "%s doctor: unknown argument '%s'\n", prog, argv[i]);
    usage_doctor(stderr);
    return EXIT_USAGE;
  }
  printf("jitk %s\n", jitk_version());

  int major = 0, minor = 0;
  jitk_status st = jitk_nvrtc_version(&major, &minor);
  if (st != JITK_OK) return fail(NULL, st, "NVRTC");
  int archs[64];
  size_t narchs = 0;
  printf("NVRTC:        %d.%d", major, minor);
  if (jitk_nvrtc_supported_archs(archs, 64, &narchs) == JITK_OK) {
    printf(", targets");
    for (size_t i = 0; i < narchs && i < 64; i++) printf(" sm_%d", archs[i]);
  }
  printf("\n");

  /* A compile-only engine finds the headers exactly as a real one would. */
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  char arch[16];
  snprintf(arch, sizeof arch, "sm_%d", narchs > 0 ? archs[narchs - 1] : 90);
  cfg.arch = arch;
  jitk_engine *ce = NULL;
  st = jitk_engine_create(&cfg, &ce);
  if (st != JITK_OK) return fail(NULL, st, "creating a compile-only engine");
  const char *inc = NULL;
  jitk_engine_cuda_include_dir(ce, &inc);
  printf("CUDA headers: %s\n", inc ? inc : "NOT FOUND (set CUDA_HOME)");
  jitk_pch_info pi;
  memset(&pi, 0, sizeof pi);
  pi.struct_size = sizeof pi;
  if (jitk_engine_pch_info(ce, &pi) == JITK_OK)
    printf("precompiled headers: %s (NVRTC's heap for them: %zu MiB)\n", pi.state,
           pi.heap_bytes >> 20);
  /* The remote cache tier, when one is configured: asked to answer now. */
  jitk_cache_remote_info ri;
  jitk_cache_remote_info_init(&ri);
  if (jitk_cache_remote_get_info(ce, &ri, NULL) == JITK_OK && ri.url != NULL) {
    double ms = 0;
    const char *sig = ri.signed_entries ? ", entries signed with the cluster's key" : "";
    if (jitk_cache_remote_ping(ce, &ms) == JITK_OK)
      printf("remote cache: %s, answers in %.1f ms%s\n", ri.url, ms, sig);
    else
      printf("remote cache: %s, NOT USABLE: %s%s\n", ri.url, jitk_errmsg(ce), sig);
  }
  jitk_engine_destroy(ce);

  int version = 0, count = 0;
  st = jitk_driver_query(NULL, &version, &count);
  if (st == JITK_ERR_NO_DRIVER) {
    printf("driver:       none (%s)\n", jitk_errmsg(NULL));
    printf("devices:      none; jitk can compile here but not launch\n");
    return 0;
  }
  if (st != JITK_OK) return fail(NULL, st, "querying the driver");
  printf("driver:       CUDA %d.%d\n", version / 1000, (version % 1000) / 10);
  printf("devices:      %d\n", count);
  for (int d = 0; d < count; d++) {
    jitk_device_info info;
    st = jitk_device_query(NULL, d, &info);
    if (st != JITK_OK) {
      printf("  device %d: %s\n", d, jitk_errmsg(NULL));
      continue;
    }
    char mem[32], l2[32], smem[32];
    human_bytes(info.total_memory, mem, sizeof mem);
    human_bytes((size_t)info.l2_cache_bytes, l2, sizeof l2);
    human_bytes(info.shared_per_block_optin, smem, sizeof smem);
    printf(
        "  device %d: %s, compute capability %d.%d, %d SMs, %s memory, "
        "%s L2, %s shared per block (opt-in)\n",
        d, info.name, info.cc_major, info.cc_minor, info.multiprocessors, mem, l2, smem);
  }
  return 0;
}

/* Derives FILE.cubin / FILE.ptx from FILE.cu. */
static char *default_output(const char *input, int ptx) {
  const char *ext = ptx ? ".ptx" : ".cubin";
  size_t n = strlen(input);
  const char *dot = strrchr(input, '.');
  const char *slash = strrchr(input, '/');
  if (dot != NULL && (slash == NULL || dot > slash)) n = (size_t)(dot - input);
  char *out = malloc(n + strlen(ext) + 1);
  if (out == NULL) return NULL;
  memcpy(out, input, n);
  strcpy(out + n, ext);
  return out;
}

static const char *display_name(const char *lowered, char **exprs, const char **lowered_of,
                                int nexpr) {
  for (int i = 0; i < nexpr; i++)
    if (lowered_of[i] && strcmp(lowered_of[i], lowered) == 0) return exprs[i];
  return NULL;
}

/* Registers, shared memory and spills per kernel, as ptxas reported. */
static void print_resources(jitk_module *m, char **exprs, int nexpr) {
  const jitk_kernel_resources *res;
  size_t nres = 0;
  jitk_module_resources(m, &res, &nres);
  const char **lowered_of = calloc((size_t)nexpr + 1, sizeof *lowered_of);
  for (int i = 0; lowered_of && i < nexpr; i++)
    jitk_module_lowered_name(m, exprs[i], &lowered_of[i]);
  if (nres > 0) {
    printf("%-40s %9s %10s %8s %12s %11s\n", "kernel", "registers", "shared", "stack",
           "spill stores", "spill loads");
    for (size_t i = 0; i < nres; i++) {
      const char *shown = lowered_of ? display_name(res[i].name, exprs, lowered_of, nexpr) : NULL;
      char label[512];
      if (shown)
        snprintf(label, sizeof label, "%s (%s)", shown, res[i].name);
      else
        snprintf(label, sizeof label, "%s", res[i].name);
      printf("%-40s %9d %8zu B %6zu B %10zu B %9zu B\n", label, res[i].registers,
             res[i].shared_bytes, res[i].stack_bytes, res[i].spill_stores, res[i].spill_loads);
    }
  } else {
    printf("(PTX: registers and spills are decided when the driver compiles it)\n");
    for (int i = 0; lowered_of && i < nexpr; i++)
      printf("%s -> %s\n", exprs[i], lowered_of[i] ? lowered_of[i] : "?");
  }
  free(lowered_of);
}

/* The target for a compile: the one asked for, else the GPU's, else sm_90;
 * compute_XY when PTX is wanted. */
static void choose_target(const char *arch, int ptx, char *target, size_t n) {
  if (arch == NULL) {
    jitk_device_info info;
    if (jitk_device_query(NULL, 0, &info) == JITK_OK) {
      snprintf(target, n, "sm_%d%d", info.cc_major, info.cc_minor);
    } else {
      snprintf(target, n, "sm_90");
      fprintf(stderr, "%s compile: no GPU found; compiling for sm_90 (--arch to choose)\n", prog);
    }
  } else {
    snprintf(target, n, "%s", arch);
  }
  if (ptx && strncmp(target, "sm_", 3) == 0) {
    /* sm_90 becomes compute_90: shift the digits right by five bytes. */
    size_t len = strlen(target);
    if (len + 5 < n) {
      memmove(target + 8, target + 3, len - 2);
      memcpy(target, "compute_", 8);
    }
  }
}

/* A compile-only engine for `arch` (see choose_target), its target name in
 * `target`. */
static jitk_status compile_engine(const char *arch, int ptx, int no_cache, char *target, size_t n,
                                  jitk_engine **e) {
  choose_target(arch, ptx, target, n);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = target;
  if (no_cache) cfg.cache_mode = JITK_CACHE_OFF;
  *e = NULL;
  return jitk_engine_create(&cfg, e);
}

/* The end of `compile elementwise|reduction`: the error, the source, or
 * the image written and its resources. Returns the exit code. */
static int finish_generated(jitk_engine *e, jitk_status st, const char *emit, const char *source,
                            jitk_module *m, const char *output, const char *name, int want_ptx,
                            const char *target) {
  if (st != JITK_OK) {
    fprintf(stderr, "%s\n", jitk_errmsg(e));
    return 1;
  }
  if (strcmp(emit, "source") == 0) {
    fputs(source, stdout);
    return 0;
  }
  const void *image;
  size_t size;
  jitk_module_image(m, &image, &size, NULL);
  char path[512];
  if (output != NULL)
    snprintf(path, sizeof path, "%s", output);
  else
    snprintf(path, sizeof path, "%s.%s", name, want_ptx ? "ptx" : "cubin");
  FILE *f = fopen(path, "wb");
  if (f == NULL || fwrite(image, 1, size, f) != size || fclose(f) != 0) {
    fprintf(stderr, "%s compile: cannot write %s: %s\n", prog, path, strerror(errno));
    return 1;
  }
  printf("%s: %zu bytes of %s for %s\n", path, size, want_ptx ? "PTX" : "cubin", target);
  print_resources(m, NULL, 0);
  return 0;
}

/* A whole-string int option value; 0 when it is not one (atoi read
 * "--vector abc" as 0, the default, without a word). */
static int parse_int(const char *s, int *v) {
  char *end;
  errno = 0;
  long x = strtol(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0 || x < INT_MIN || x > INT_MAX) return 0;
  *v = (int)x;
  return 1;
}

static void usage_elementwise(FILE *out) {
  fprintf(out,
          "usage: %s compile elementwise --in PARAMS --out PARAMS --op CODE [options]\n"
          "\n"
          "Generates the CUDA source of an elementwise kernel for the given types,\n"
          "compiles it (no GPU needed) and prints its registers and spills.\n"
          "\n"
          "options:\n"
          "  --in 'T x, T y'          input parameters ([raw] TYPE NAME, ...)\n"
          "  --out 'T z'              output parameters ([raw] TYPE NAME, ...; a raw\n"
          "                           output is written by the operation: z[i] = ...)\n"
          "  --op 'z = x + y'         the operation on one element\n"
          "  --name NAME              the kernel's name (default: kernel)\n"
          "  --type T=float16         bind a placeholder; repeatable\n"
          "  --scalar NAME            the parameter is a scalar, not an array; repeatable\n"
          "  --preamble CODE, --loop-prep CODE, --after-loop CODE\n"
          "  --ndim N                 loop dimensions after collapsing (default 1)\n"
          "  --index 32|64            index width (default 32)\n"
          "  --vector N               elements per vector access (default: widest)\n"
          "  --arch ARCH              target (default: the GPU's, or sm_90)\n"
          "  --emit source|ptx|cubin  print the source, or write PTX or a cubin\n"
          "                           (default: cubin)\n"
          "  -o OUT                   where --emit ptx|cubin writes (default NAME.cubin)\n",
          prog);
}

static int cmd_compile_elementwise(int argc, char **argv) {
  const char *in = NULL, *out_params = NULL, *op = NULL, *name = "kernel", *arch = NULL;
  const char *emit = "cubin", *output = NULL;
  char types[1024] = "", scalars[1024] = "";
  jitk_elementwise_options eo;
  memset(&eo, 0, sizeof eo);
  jitk_elementwise_layout layout = {1, 32, 0, NULL};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_elementwise(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s compile elementwise: '%s' needs a value or is unknown\n", prog, a);
      usage_elementwise(stderr);
      return EXIT_USAGE;
    }
    const char *v = argv[++i];
    if (strcmp(a, "--in") == 0)
      in = v;
    else if (strcmp(a, "--out") == 0)
      out_params = v;
    else if (strcmp(a, "--op") == 0)
      op = v;
    else if (strcmp(a, "--name") == 0)
      name = v;
    else if (strcmp(a, "--arch") == 0)
      arch = v;
    else if (strcmp(a, "--emit") == 0)
      emit = v;
    else if (strcmp(a, "-o") == 0)
      output = v;
    else if (strcmp(a, "--preamble") == 0)
      eo.preamble = v;
    else if (strcmp(a, "--loop-prep") == 0)
      eo.loop_prep = v;
    else if (strcmp(a, "--after-loop") == 0)
      eo.after_loop = v;
    else if (strcmp(a, "--ndim") == 0 || strcmp(a, "--index") == 0 || strcmp(a, "--vector") == 0) {
      int *dst = a[2] == 'n' ? &layout.ndim : a[2] == 'i' ? &layout.index_bits : &layout.vector;
      if (!parse_int(v, dst)) {
        fprintf(stderr, "%s compile elementwise: '%s' is not a valid value for %s\n", prog, v, a);
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--type") == 0 || strcmp(a, "--scalar") == 0) {
      char *dst = a[2] == 't' ? types : scalars;
      size_t used = strlen(dst);
      snprintf(dst + used, 1024 - used, "%s%s", used ? "," : "", v);
    } else {
      fprintf(stderr, "%s compile elementwise: unknown option '%s'\n", prog, a);
      usage_elementwise(stderr);
      return EXIT_USAGE;
    }
  }
  if (in == NULL || out_params == NULL || op == NULL) {
    fprintf(stderr, "%s compile elementwise: --in, --out and --op are required\n", prog);
    usage_elementwise(stderr);
    return EXIT_USAGE;
  }
  int want_ptx = strcmp(emit, "ptx") == 0;
  if (!want_ptx && strcmp(emit, "cubin") != 0 && strcmp(emit, "source") != 0) {
    fprintf(stderr, "%s compile elementwise: --emit is source, ptx or cubin\n", prog);
    return EXIT_USAGE;
  }
  layout.scalars = scalars;
  char target[32];
  jitk_engine *e = NULL;
  jitk_status st = compile_engine(arch, want_ptx, 0, target, sizeof target, &e);
  if (st != JITK_OK) return fail(NULL, st, "creating the engine");
  jitk_elementwise *k = NULL;
  jitk_module *m = NULL;
  st = jitk_elementwise_create(e, in, out_params, op, name, &eo, &k);
  const char *source = NULL;
  if (st == JITK_OK) st = jitk_elementwise_compile(k, types, &layout, &source, &m);
  int rc = finish_generated(e, st, emit, source, m, output, name, want_ptx, target);
  jitk_module_destroy(m);
  jitk_elementwise_destroy(k);
  jitk_engine_destroy(e);
  return rc;
}

static void usage_reduction(FILE *out) {
  fprintf(out,
          "usage: %s compile reduction --in PARAMS --out PARAMS --map CODE --reduce CODE\n"
          "                             --post-map CODE [options]\n"
          "\n"
          "Generates the CUDA source of a reduction kernel for the given types and\n"
          "layout, compiles it (no GPU needed) and prints its registers and spills.\n"
          "\n"
          "options:\n"
          "  --in 'T x'               input parameters ([raw] TYPE NAME, ...)\n"
          "  --out 'T y'              output parameters (TYPE NAME, ...; never raw)\n"
          "  --map 'x * x'            maps one element to a value of the reduce type\n"
          "  --reduce 'a + b'         combines two mapped values, a and b\n"
          "  --post-map 'y = a'       assigns the outputs from the result a\n"
          "  --identity CODE          the value of an empty reduction (default: none)\n"
          "  --reduce-type TYPE       the type of a, b (default: the first input's)\n"
          "  --name NAME              the kernel's name (default: kernel)\n"
          "  --type T=float16         bind a placeholder; repeatable\n"
          "  --preamble CODE          helper functions and types before the kernels\n"
          "  --kept-ndim N            output dimensions after collapsing (default 0)\n"
          "  --reduced-ndim N         reduced dimensions after collapsing (default 1)\n"
          "  --index 32|64            index width (default 32); --index-bits too\n"
          "  --strategy i|o|m|r       i: along contiguous reduced elements (rows);\n"
          "                           o: across contiguous outputs (columns);\n"
          "                           m: one element or vector an output, several\n"
          "                           outputs a thread; r: segments of rows of\n"
          "                           outputs in 16-byte vectors, several rows at\n"
          "                           once, 32 outputs a segment (default i)\n"
          "  --split 0|1|2|3          0: each output in one piece (default);\n"
          "                           1, 2, 3: in chunks, which the last block to\n"
          "                           finish combines with a warp (1), a block\n"
          "                           (2) or a thread (3) per output\n"
          "  --arch ARCH              target (default: the GPU's, or sm_90)\n"
          "  --emit source|ptx|cubin  print the source, or write PTX or a cubin\n"
          "                           (default: cubin)\n"
          "  -o OUT                   where --emit ptx|cubin writes (default NAME.cubin)\n",
          prog);
}

/* `jitk compile reduction`: as `jitk compile elementwise`, for
 * jitk_reduction_compile. Kept a separate function rather than sharing a
 * parser with elementwise because the two option sets differ in most of
 * their entries, and each usage text documents exactly what it accepts. */
static int cmd_compile_reduction(int argc, char **argv) {
  const char *in = NULL, *out_params = NULL, *map = NULL, *reduce = NULL, *post_map = NULL;
  const char *identity = NULL, *reduce_type = NULL, *name = "kernel", *arch = NULL;
  const char *emit = "cubin", *output = NULL;
  char types[1024] = "";
  jitk_reduction_options ro;
  memset(&ro, 0, sizeof ro);
  jitk_reduction_layout layout = {0, 1, 32, 'i', 0};
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_reduction(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s compile reduction: '%s' needs a value or is unknown\n", prog, a);
      usage_reduction(stderr);
      return EXIT_USAGE;
    }
    const char *v = argv[++i];
    if (strcmp(a, "--in") == 0)
      in = v;
    else if (strcmp(a, "--out") == 0)
      out_params = v;
    else if (strcmp(a, "--map") == 0)
      map = v;
    else if (strcmp(a, "--reduce") == 0)
      reduce = v;
    else if (strcmp(a, "--post-map") == 0)
      post_map = v;
    else if (strcmp(a, "--identity") == 0)
      identity = v;
    else if (strcmp(a, "--reduce-type") == 0)
      reduce_type = v;
    else if (strcmp(a, "--name") == 0)
      name = v;
    else if (strcmp(a, "--arch") == 0)
      arch = v;
    else if (strcmp(a, "--emit") == 0)
      emit = v;
    else if (strcmp(a, "-o") == 0)
      output = v;
    else if (strcmp(a, "--preamble") == 0)
      ro.preamble = v;
    /* --index as elementwise spells it; --index-bits after the layout's
     * field, so that either spelling works. */
    else if (strcmp(a, "--kept-ndim") == 0 || strcmp(a, "--reduced-ndim") == 0 ||
             strcmp(a, "--index") == 0 || strcmp(a, "--index-bits") == 0 ||
             strcmp(a, "--split") == 0) {
      int *dst = a[2] == 'k'   ? &layout.kept_ndim
                 : a[2] == 'r' ? &layout.reduced_ndim
                 : a[2] == 'i' ? &layout.index_bits
                               : &layout.split;
      if (!parse_int(v, dst)) {
        fprintf(stderr, "%s compile reduction: '%s' is not a valid value for %s\n", prog, v, a);
        return EXIT_USAGE;
      }
    } else if (strcmp(a, "--strategy") == 0) {
      /* The layout holds one character; a longer word would be cut to its
       * first letter without a word of warning, so refuse it here. */
      if (strcmp(v, "i") != 0 && strcmp(v, "o") != 0 && strcmp(v, "m") != 0 &&
          strcmp(v, "r") != 0) {
        fprintf(stderr, "%s compile reduction: --strategy is i, o, m or r, not '%s'\n", prog, v);
        return EXIT_USAGE;
      }
      layout.strategy = v[0];
    } else if (strcmp(a, "--type") == 0) {
      size_t used = strlen(types);
      snprintf(types + used, sizeof types - used, "%s%s", used ? "," : "", v);
    } else {
      fprintf(stderr, "%s compile reduction: unknown option '%s'\n", prog, a);
      usage_reduction(stderr);
      return EXIT_USAGE;
    }
  }
  if (in == NULL || out_params == NULL || map == NULL || reduce == NULL || post_map == NULL) {
    fprintf(stderr,
            "%s compile reduction: --in, --out, --map, --reduce and --post-map are required\n",
            prog);
    usage_reduction(stderr);
    return EXIT_USAGE;
  }
  int want_ptx = strcmp(emit, "ptx") == 0;
  if (!want_ptx && strcmp(emit, "cubin") != 0 && strcmp(emit, "source") != 0) {
    fprintf(stderr, "%s compile reduction: --emit is source, ptx or cubin\n", prog);
    return EXIT_USAGE;
  }
  char target[32];
  jitk_engine *e = NULL;
  jitk_status st = compile_engine(arch, want_ptx, 0, target, sizeof target, &e);
  if (st != JITK_OK) return fail(NULL, st, "creating the engine");
  jitk_reduction *k = NULL;
  jitk_module *m = NULL;
  st = jitk_reduction_create(e, in, out_params, map, reduce, post_map, identity, reduce_type, name,
                             &ro, &k);
  const char *source = NULL;
  if (st == JITK_OK) st = jitk_reduction_compile(k, types, &layout, &source, &m);
  int rc = finish_generated(e, st, emit, source, m, output, name, want_ptx, target);
  jitk_module_destroy(m);
  jitk_reduction_destroy(k);
  jitk_engine_destroy(e);
  return rc;
}

static void usage_matmul(FILE *out) {
  fprintf(out,
          "usage: %s compile matmul --m M --n N --k K [options]\n"
          "\n"
          "Plans D = epilogue(alpha * A @ B + beta * C) as jitk_matmul_create does:\n"
          "picks a kernel configuration, generates and compiles the kernel (no GPU\n"
          "needed), and prints the configuration chosen.\n"
          "\n"
          "options:\n"
          "  --m M, --n N, --k K      A is M x K, B K x N, C and D M x N (required)\n"
          "  --batch B                matrices per operand (default 1)\n"
          "  --a, --b, --d DTYPE      dtypes of A, B and D (default float32)\n"
          "  --c DTYPE                C's dtype; giving it reads C (beta * C)\n"
          "  --compute default|float32|tf32|float16|bfloat16|float64|float32_fast_accum\n"
          "                           the products' and sums' arithmetic (default:\n"
          "                           float64 for float64 inputs, else float32;\n"
          "                           float32_fast_accum: float8 inputs without promotion)\n"
          "  --order-a, --order-b, --order-c, --order-d row|col\n"
          "                           storage order (default row)\n"
          "  --epilogue EXPR          the result from acc, row, col, batch and the\n"
          "                           params, e.g. 'max(acc + bias[col], (T)0)'\n"
          "  --params LIST            the epilogue's operands, e.g. 'raw T bias'\n"
          "  --preamble CODE          helper functions for the epilogue\n"
          "  --alpha X, --beta X      scales (default 1 and 0)\n"
          "  --name NAME              the kernel's name (default: matmul)\n"
          "  --arch ARCH              target (default: the GPU's, or sm_90)\n"
          "  --emit describe|source   print the configuration (default), or the\n"
          "                           generated CUDA source\n",
          prog);
}

/* A whole-string integer option value; 0 when it is not one. */
static int parse_int64(const char *s, int64_t *v) {
  char *end;
  errno = 0;
  long long x = strtoll(s, &end, 10);
  if (end == s || *end != '\0' || errno != 0) return 0;
  *v = (int64_t)x;
  return 1;
}

static int parse_double(const char *s, double *v) {
  char *end;
  errno = 0;
  double x = strtod(s, &end);
  if (end == s || *end != '\0' || errno != 0) return 0;
  *v = x;
  return 1;
}

/* `jitk compile matmul`: jitk_matmul_create on a compile-only engine. A
 * plan keeps its module to itself, so this prints the plan's description
 * or its source; there is no image to write. */
static int cmd_compile_matmul(int argc, char **argv) {
  static const struct {
    const char *name;
    jitk_compute compute;
  } computes[] = {{"default", JITK_COMPUTE_DEFAULT},
                  {"float32", JITK_COMPUTE_FLOAT32},
                  {"tf32", JITK_COMPUTE_TF32},
                  {"float16", JITK_COMPUTE_FLOAT16},
                  {"bfloat16", JITK_COMPUTE_BFLOAT16},
                  {"float64", JITK_COMPUTE_FLOAT64},
                  {"float32_fast_accum", JITK_COMPUTE_FLOAT32_FAST_ACCUM}};
  jitk_matmul_desc desc;
  jitk_matmul_desc_init(&desc);
  desc.m = desc.n = desc.k = -1;
  const char *arch = NULL, *emit = "describe";
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_matmul(stdout);
      return 0;
    }
    if (i + 1 >= argc) {
      fprintf(stderr, "%s compile matmul: '%s' needs a value or is unknown\n", prog, a);
      usage_matmul(stderr);
      return EXIT_USAGE;
    }
    const char *v = argv[++i];
    int ok = 1;
    if (strcmp(a, "--m") == 0)
      ok = parse_int64(v, &desc.m);
    else if (strcmp(a, "--n") == 0)
      ok = parse_int64(v, &desc.n);
    else if (strcmp(a, "--k") == 0)
      ok = parse_int64(v, &desc.k);
    else if (strcmp(a, "--batch") == 0)
      ok = parse_int64(v, &desc.batch);
    else if (strcmp(a, "--alpha") == 0)
      ok = parse_double(v, &desc.alpha);
    else if (strcmp(a, "--beta") == 0)
      ok = parse_double(v, &desc.beta);
    else if (strcmp(a, "--a") == 0)
      ok = jitk_dtype_from_name(v, &desc.a_dtype) == JITK_OK;
    else if (strcmp(a, "--b") == 0)
      ok = jitk_dtype_from_name(v, &desc.b_dtype) == JITK_OK;
    else if (strcmp(a, "--d") == 0)
      ok = jitk_dtype_from_name(v, &desc.d_dtype) == JITK_OK;
    else if (strcmp(a, "--c") == 0) {
      ok = jitk_dtype_from_name(v, &desc.c_dtype) == JITK_OK;
      desc.has_c = 1;
    } else if (strncmp(a, "--order-", 8) == 0 && strlen(a) == 9 && strchr("abcd", a[8])) {
      jitk_order *order = a[8] == 'a'   ? &desc.a_order
                          : a[8] == 'b' ? &desc.b_order
                          : a[8] == 'c' ? &desc.c_order
                                        : &desc.d_order;
      ok = strcmp(v, "row") == 0 || strcmp(v, "col") == 0;
      *order = strcmp(v, "col") == 0 ? JITK_COL_MAJOR : JITK_ROW_MAJOR;
    } else if (strcmp(a, "--compute") == 0) {
      ok = 0;
      for (size_t c = 0; c < sizeof computes / sizeof computes[0]; c++)
        if (strcmp(v, computes[c].name) == 0) {
          desc.compute = computes[c].compute;
          ok = 1;
        }
    } else if (strcmp(a, "--epilogue") == 0)
      desc.epilogue = v;
    else if (strcmp(a, "--params") == 0)
      desc.epilogue_params = v;
    else if (strcmp(a, "--preamble") == 0)
      desc.preamble = v;
    else if (strcmp(a, "--name") == 0)
      desc.name = v;
    else if (strcmp(a, "--arch") == 0)
      arch = v;
    else if (strcmp(a, "--emit") == 0)
      emit = v;
    else {
      fprintf(stderr, "%s compile matmul: unknown option '%s'\n", prog, a);
      usage_matmul(stderr);
      return EXIT_USAGE;
    }
    if (!ok) {
      fprintf(stderr, "%s compile matmul: '%s' is not a valid value for %s\n", prog, v, a);
      usage_matmul(stderr);
      return EXIT_USAGE;
    }
  }
  if (desc.m < 0 || desc.n < 0 || desc.k < 0) {
    fprintf(stderr, "%s compile matmul: --m, --n and --k are required\n", prog);
    usage_matmul(stderr);
    return EXIT_USAGE;
  }
  if (strcmp(emit, "describe") != 0 && strcmp(emit, "source") != 0) {
    fprintf(stderr,
            "%s compile matmul: --emit is describe or source; a plan keeps its compiled "
            "image to itself, so this command writes no PTX or cubin\n",
            prog);
    return EXIT_USAGE;
  }
  char target[32];
  jitk_engine *e = NULL;
  jitk_status st = compile_engine(arch, 0, 0, target, sizeof target, &e);
  if (st != JITK_OK) return fail(NULL, st, "creating the engine");
  jitk_matmul *plan = NULL;
  st = jitk_matmul_create(e, &desc, &plan);
  int rc;
  if (st == JITK_OK && strcmp(emit, "describe") == 0) {
    char described[512];
    st = jitk_matmul_describe(plan, described, sizeof described);
    /* wgmma kernels are compiled for the arch-specific target (sm_90a). */
    if (st == JITK_OK)
      printf("plan: %s\ncompiled for %s%s\n", described, target,
             strstr(described, "(wgmma, ") != NULL && target[strlen(target) - 1] != 'a' ? "a" : "");
    rc = st == JITK_OK ? 0 : fail(e, st, "describing the plan");
  } else {
    /* The source, or the error of the plan's creation. */
    const char *source = NULL;
    if (st == JITK_OK) st = jitk_matmul_source(plan, &source);
    rc = finish_generated(e, st, "source", source, NULL, NULL, NULL, 0, target);
  }
  jitk_matmul_destroy(plan);
  jitk_engine_destroy(e);
  return rc;
}

static int cmd_compile(int argc, char **argv) {
  if (argc > 0 && strcmp(argv[0], "elementwise") == 0)
    return cmd_compile_elementwise(argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "reduction") == 0)
    return cmd_compile_reduction(argc - 1, argv + 1);
  if (argc > 0 && strcmp(argv[0], "matmul") == 0) return cmd_compile_matmul(argc - 1, argv + 1);
  const char *input = NULL, *output = NULL, *arch = NULL;
  int ptx = 0, no_cache = 0;
  char **exprs = calloc((size_t)argc + 1, sizeof *exprs);
  const char **opts = calloc((size_t)argc + 1, sizeof *opts);
  int nexpr = 0, nopt = 0, rc = 0;
  if (exprs == NULL || opts == NULL) {
    fprintf(stderr, "%s compile: out of memory\n", prog);
    free(exprs);
    free(opts);
    return 1;
  }
  for (int i = 0; i < argc; i++) {
    const char *a = argv[i];
    int has_next = i + 1 < argc;
    if (strcmp(a, "--help") == 0 || strcmp(a, "-h") == 0) {
      usage_compile(stdout);
      goto out;
    } else if (strcmp(a, "--arch") == 0 && has_next) {
      arch = argv[++i];
    } else if (strncmp(a, "--arch=", 7) == 0) {
      arch = a + 7;
    } else if (strcmp(a, "--ptx") == 0) {
      ptx = 1;
    } else if (strcmp(a, "--no-cache") == 0) {
      no_cache = 1;
    } else if (strcmp(a, "--name-expression") == 0 && has_next) {
      exprs[nexpr++] = argv[++i];
    } else if (strcmp(a, "-o") == 0 && has_next) {
      output = argv[++i];
    } else if (strcmp(a, "--option") == 0 && has_next) {
      opts[nopt++] = argv[++i];
    } else if ((strncmp(a, "-D", 2) == 0 || strncmp(a, "-I", 2) == 0) && a[2] != '\0') {
      opts[nopt++] = a;
    } else if (a[0] == '-') {
      fprintf(stderr, "%s compile: unknown or incomplete option '%s'\n", prog, a);
      usage_compile(stderr);
      rc = EXIT_USAGE;
      goto out;
    } else if (input == NULL) {
      input = a;
    } else {
      fprintf(stderr, "%s compile: one input file only ('%s' and '%s')\n", prog, input, a);
      rc = EXIT_USAGE;
      goto out;
    }
  }
  if (input == NULL) {
    fprintf(stderr, "%s compile: no input file\n", prog);
    usage_compile(stderr);
    rc = EXIT_USAGE;
    goto out;
  }

  size_t size = 0;
  char *source = read_file(input, &size);
  if (source == NULL) {
    fprintf(stderr, "%s compile: cannot read %s: %s\n", prog, input, strerror(errno));
    rc = 1;
    goto out;
  }

  char target[32];
  jitk_engine *e = NULL;
  jitk_module *m = NULL;
  char *out_path = NULL;
  jitk_status st = compile_engine(arch, ptx, no_cache, target, sizeof target, &e);
  if (st != JITK_OK) {
    rc = fail(NULL, st, "creating the engine");
    goto done;
  }
  jitk_module_options mo;
  memset(&mo, 0, sizeof mo);
  mo.options = opts;
  mo.num_options = (size_t)nopt;
  mo.name_expressions = (const char *const *)exprs;
  mo.num_name_expressions = (size_t)nexpr;
  mo.program_name = input;
  st = jitk_module_create(e, source, &mo, &m);
  if (st != JITK_OK) {
    fprintf(stderr, "%s\n", jitk_errmsg(e));
    rc = 1;
    goto done;
  }
  const void *image;
  size_t image_size;
  jitk_image_kind kind;
  jitk_module_image(m, &image, &image_size, &kind);
  out_path = output ? NULL : default_output(input, kind == JITK_IMAGE_PTX);
  const char *dest = output ? output : out_path;
  if (dest == NULL) {
    fprintf(stderr, "%s compile: out of memory\n", prog);
    rc = 1;
    goto done;
  }
  FILE *f = fopen(dest, "wb");
  if (f == NULL || fwrite(image, 1, image_size, f) != image_size || fclose(f) != 0) {
    fprintf(stderr, "%s compile: cannot write %s: %s\n", prog, dest, strerror(errno));
    rc = 1;
    goto done;
  }
  printf("%s: %zu bytes of %s for %s\n", dest, image_size, kind == JITK_IMAGE_PTX ? "PTX" : "cubin",
         target);

  print_resources(m, exprs, nexpr);

done:
  free(out_path);
  jitk_module_destroy(m);
  jitk_engine_destroy(e);
  free(source);
out:
  free(exprs);
  free(opts);
  return rc;
}

static void usage_cache(FILE *out) {
  fprintf(out,
          "usage: %s cache <command> [--dir DIR]\n"
          "\n"
          "The kernel cache: compiled kernels kept in an SQLite database shared by\n"
          "every process of this user (JITK_CACHE_DIR, else $XDG_CACHE_HOME/jitk,\n"
          "else ~/.cache/jitk; --dir chooses another).\n"
          "\n"
          "commands:\n"
          "  path                  the folder, the database and whether it is usable\n"
          "  stats [--json]        hits, misses, compiles, size, summed over every process\n"
          "  ls                    the entries, least recently used first\n"
          "  verify                check every entry; remove the bad ones\n"
          "  prune [--max-size N]  evict least recently used entries down to N bytes\n"
          "                        (K, M, G suffixes; default: the configured cap)\n"
          "  clear                 remove every entry\n"
          "  export FILE           write every entry to a new database FILE (mode 0600)\n"
          "  import FILE           add FILE's entries (each verified) to this cache;\n"
          "                        import only files you made or trust: they are code\n"
          "  publish DIR           copy this cache's entries into the shared cache DIR,\n"
          "                        for others to read (JITK_CACHE_SHARED_DIR=DIR with\n"
          "                        JITK_CACHE_SHARED_OWNER naming you)\n"
          "  push                  copy every entry to the remote tier (JITK_CACHE_REMOTE)\n"
          "  pull                  copy the remote's entries that serve this machine here,\n"
          "                        each verified\n"
          "  warm FILE [--arch A]... [--threads N] [--remote-only]\n"
          "                        compile every kernel the manifest FILE recorded\n"
          "                        (JITK_CACHE_RECORD=FILE in a run) that no tier has yet,\n"
          "                        in parallel, for its recorded targets (--arch: only\n"
          "                        those), into this cache and the remote when one is\n"
          "                        configured (--remote-only: the remote alone); needs\n"
          "                        no GPU\n",
          prog);
}

/* The targets a manifest's lines were recorded for, in order of first
 * appearance: the "target" field, which every line has near its start.
 * -1 with errno when the file cannot be read, -2 when it is not a regular
 * file: opened without waiting, so that a FIFO does not hang the command
 * until some writer comes. */
static int manifest_targets(const char *path, char targets[][32], int most) {
  int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) return -1;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int err = errno;
    close(fd);
    errno = err;
    return -1;
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return -2;
  }
  FILE *f = fdopen(fd, "r");
  if (f == NULL) {
    close(fd);
    return -1;
  }
  int n = 0;
  char head[256];
  while (fgets(head, sizeof head, f) != NULL) {
    size_t len = strlen(head);
    /* Skip the rest of a long line. */
    int ch = 0;
    if (len > 0 && head[len - 1] != '\n')
      while ((ch = fgetc(f)) != EOF && ch != '\n') {
      }
    const char *t = strstr(head, "\"target\":\"");
    if (t == NULL) continue;
    t += 10;
    const char *end = strchr(t, '"');
    if (end == NULL || end - t >= 32 || end == t) continue;
    int known = 0;
    for (int i = 0; i < n && !known; i++)
      known = strncmp(targets[i], t, (size_t)(end - t)) == 0 && targets[i][end - t] == '\0';
    if (!known && n < most) {
      memcpy(targets[n], t, (size_t)(end - t));
      targets[n][end - t] = '\0';
      n++;
    }
  }
  /* A file that fails a read is not a manifest that records nothing. */
  const int err = ferror(f) ? errno : 0;
  fclose(f);
  if (err != 0) {
    errno = err;
    return -1;
  }
  return n;
}

typedef struct warm_bar {
  const char *arch;
  int width;
} warm_bar;

static void warm_progress(void *user, size_t finished, size_t total, size_t failed) {
  const warm_bar *b = user;
  int fill = total ? (int)((double)finished / (double)total * b->width) : b->width;
  char bar[128];
  for (int i = 0; i < b->width; i++) bar[i] = i < fill ? '#' : '.';
  bar[b->width] = '\0';
  fprintf(stderr, "\r%s [%s] %zu/%zu", b->arch, bar, finished, total);
  if (failed) fprintf(stderr, ", %zu failed", failed);
  if (finished == total) fputc('\n', stderr);
  fflush(stderr);
}

static int cmd_cache_warm(int argc, char **argv) {
  const char *file = NULL, *dir = NULL;
  const char *archs[32];
  int narchs = 0, threads = 0, remote_only = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage_cache(stdout);
      return 0;
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--arch") == 0 && i + 1 < argc && narchs < 32) {
      archs[narchs++] = argv[++i];
    } else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
      char *end;
      long v = strtol(argv[++i], &end, 10);
      if (*end != '\0' || v < 1 || v > 1024) {
        fprintf(stderr, "%s cache warm: --threads '%s' is not a number from 1 to 1024\n", prog,
                argv[i]);
        return EXIT_USAGE;
      }
      threads = (int)v;
    } else if (strcmp(argv[i], "--remote-only") == 0) {
      remote_only = 1;
    } else if (argv[i][0] != '-' && file == NULL) {
      file = argv[i];
    } else {
      fprintf(stderr, "%s cache warm: unexpected argument '%s'\n", prog, argv[i]);
      usage_cache(stderr);
      return EXIT_USAGE;
    }
  }
  if (file == NULL) {
    fprintf(stderr, "%s cache warm: which manifest FILE?\n", prog);
    return EXIT_USAGE;
  }
  char recorded[32][32];
  int nrec = manifest_targets(file, recorded, 32);
  if (nrec < 0) {
    fprintf(stderr, "%s cache warm: cannot read %s: %s\n", prog, file,
            nrec == -2 ? "not a regular file" : strerror(errno));
    return 1;
  }
  if (narchs == 0)
    for (int i = 0; i < nrec; i++) archs[narchs++] = recorded[i];
  if (narchs == 0) {
    printf("%s records no kernels\n", file);
    return 0;
  }
  int rc = 0;
  for (int a = 0; a < narchs; a++) {
    int known = 0;
    for (int i = 0; i < nrec && !known; i++) known = strcmp(recorded[i], archs[a]) == 0;
    if (!known) {
      /* What jitk generates can depend on the device, so a manifest is
       * not compiled for a target it was not recorded on. */
      fprintf(stderr,
              "%s cache warm: %s records no kernels for %s; record a run on a device of that "
              "target\n",
              prog, file, archs[a]);
      rc = 1;
      continue;
    }
    jitk_engine_config cfg;
    jitk_engine_config_init(&cfg);
    cfg.device = JITK_DEVICE_NONE;
    cfg.arch = archs[a];
    cfg.cache_dir = dir;
    cfg.cache_mode = remote_only ? JITK_CACHE_OFF : JITK_CACHE_ON;
    if (threads > 0) cfg.compile_threads = threads;
    jitk_engine *e = NULL;
    jitk_status st = jitk_engine_create(&cfg, &e);
    if (st != JITK_OK) {
      /* The other targets are still warmed. */
      rc = fail(NULL, st, "creating an engine");
      continue;
    }
    if (remote_only) {
      jitk_cache_remote_info ri;
      jitk_cache_remote_info_init(&ri);
      if (jitk_cache_remote_get_info(e, &ri, NULL) != JITK_OK || ri.url == NULL) {
        fprintf(stderr,
                "%s cache warm: --remote-only needs a remote tier (JITK_CACHE_REMOTE); none is "
                "configured\n",
                prog);
        jitk_engine_destroy(e);
        return EXIT_USAGE;
      }
    }
    int pool = 0;
    jitk_engine_compile_threads(e, &pool);
    jitk_cache_warm_options opt;
    jitk_cache_warm_options_init(&opt);
    warm_bar bar = {archs[a], 40};
    if (isatty(2)) {
      opt.progress = warm_progress;
      opt.progress_user = &bar;
    }
    jitk_cache_warm_report rep;
    memset(&rep, 0, sizeof rep);
    rep.struct_size = sizeof rep;
    st = jitk_cache_warm(e, file, &opt, &rep);
    if (st != JITK_OK) {
      rc = fail(e, st, "cache warm");
    } else {
      size_t found = rep.kernels - rep.compiled - rep.failed;
      printf("%s: %zu kernel%s: %zu compiled, %zu already cached", archs[a], rep.kernels,
             rep.kernels == 1 ? "" : "s", rep.compiled, found);
      if (rep.remote_hits) printf(" (%zu in the remote)", rep.remote_hits);
      printf(", %zu failed; in %.1f s on %d thread%s\n", rep.failed, rep.seconds, pool,
             pool == 1 ? "" : "s");
      if (rep.damaged || rep.duplicates)
        printf("%s: %zu damaged line%s skipped, %zu repeated\n", file, rep.damaged,
               rep.damaged == 1 ? "" : "s", rep.duplicates);
      if (rep.failed || rep.damaged) rc = 1;
    }
    jitk_engine_destroy(e);
  }
  return rc;
}

static long long parse_bytes(const char *s) {
  char *end;
  double v = strtod(s, &end);
  /* NaN fails both comparisons; inf and 1e30 would not fit. */
  if (end == s || !(v >= 0) || v > 1e18) return -1;
  double mult = 1;
  if (*end == 'K' || *end == 'k')
    mult = 1024.0, end++;
  else if (*end == 'M' || *end == 'm')
    mult = 1024.0 * 1024, end++;
  else if (*end == 'G' || *end == 'g')
    mult = 1024.0 * 1024 * 1024, end++;
  if (*end == 'i' || *end == 'I') end++;
  if (*end == 'B' || *end == 'b') end++;
  if (*end != '\0' || v * mult > 9.0e18) return -1;
  return (long long)(v * mult);
}

static void print_time(long long t) {
  time_t tt = (time_t)t;
  struct tm tm;
  char buf[32];
  if (localtime_r(&tt, &tm) != NULL && strftime(buf, sizeof buf, "%Y-%m-%d %H:%M", &tm) > 0)
    printf("%-17s", buf);
  else
    printf("%-17lld", t);
}

static int print_entry(void *user, const jitk_cache_entry_info *info) {
  int *n = user;
  if ((*n)++ == 0)
    printf("%-12s %-11s %-6s %10s %10s  %-17s %s\n", "key", "target", "kind", "bytes", "compile",
           "last used", "program");
  printf("%-12.12s %-11s %-6s %10zu %7.1f ms  ", info->key, info->target,
         info->kind == JITK_IMAGE_PTX ? "PTX" : "cubin", info->bytes, info->compile_ms);
  print_time(info->last_used);
  printf(" %s\n", info->label);
  return 0;
}

static int cmd_cache(int argc, char **argv) {
  if (argc < 1) {
    usage_cache(stderr);
    return EXIT_USAGE;
  }
  const char *sub = argv[0];
  if (strcmp(sub, "warm") == 0) return cmd_cache_warm(argc, argv);
  const char *dir = NULL, *file = NULL;
  int json = 0;
  long long max_size = 0;
  for (int i = 1; i < argc; i++) {
    if (strcmp(argv[i], "--help") == 0 || strcmp(argv[i], "-h") == 0) {
      usage_cache(stdout);
      return 0;
    } else if (strcmp(argv[i], "--dir") == 0 && i + 1 < argc) {
      dir = argv[++i];
    } else if (strcmp(argv[i], "--json") == 0 && strcmp(sub, "stats") == 0) {
      json = 1;
    } else if (strcmp(argv[i], "--max-size") == 0 && i + 1 < argc && strcmp(sub, "prune") == 0) {
      max_size = parse_bytes(argv[++i]);
      if (max_size == 0) {
        fprintf(stderr,
                "%s cache prune: --max-size 0 would keep nothing: `%s cache clear` "
                "empties the cache\n",
                prog, prog);
        return EXIT_USAGE;
      }
      if (max_size < 0) {
        fprintf(stderr, "%s cache prune: '%s' is not a size\n", prog, argv[i]);
        return EXIT_USAGE;
      }
    } else if (argv[i][0] != '-' && file == NULL &&
               (strcmp(sub, "export") == 0 || strcmp(sub, "import") == 0 ||
                strcmp(sub, "publish") == 0)) {
      file = argv[i];
    } else {
      fprintf(stderr, "%s cache %s: unexpected argument '%s'\n", prog, sub, argv[i]);
      usage_cache(stderr);
      return EXIT_USAGE;
    }
  }
  if (strcmp(sub, "--help") == 0 || strcmp(sub, "-h") == 0 || strcmp(sub, "help") == 0) {
    usage_cache(stdout);
    return 0;
  }
  static const char *const subs[] = {"path",   "stats",  "ls",      "verify", "prune", "clear",
                                     "export", "import", "publish", "push",   "pull",  NULL};
  int known = 0;
  for (int i = 0; subs[i]; i++) known |= strcmp(sub, subs[i]) == 0;
  if (!known) {
    fprintf(stderr, "%s cache: unknown command '%s'\n", prog, sub);
    usage_cache(stderr);
    return EXIT_USAGE;
  }
  if ((strcmp(sub, "export") == 0 || strcmp(sub, "import") == 0 || strcmp(sub, "publish") == 0) &&
      file == NULL) {
    fprintf(stderr, "%s cache %s: which %s?\n", prog, sub, strcmp(sub, "publish") ? "FILE" : "DIR");
    return EXIT_USAGE;
  }

  /* A compile-only engine is enough to reach the store; its target only
   * matters for compiling. */
  int archs[64];
  size_t narchs = 0;
  char arch[16] = "sm_90";
  if (jitk_nvrtc_supported_archs(archs, 64, &narchs) == JITK_OK && narchs > 0)
    snprintf(arch, sizeof arch, "sm_%d", archs[narchs - 1]);
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  cfg.arch = arch;
  cfg.cache_dir = dir;
  if (cfg.cache_mode == JITK_CACHE_DEFAULT && getenv("JITK_CACHE") != NULL &&
      strcmp(getenv("JITK_CACHE"), "off") == 0)
    cfg.cache_mode = JITK_CACHE_ON; /* managing the cache is asking for it */
  jitk_engine *e = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
  if (st != JITK_OK) return fail(NULL, st, "creating an engine");
  int rc = 0;
  if (strcmp(sub, "path") == 0) {
    const char *d, *db, *state;
    jitk_cache_location(e, &d, &db, &state);
    printf("folder:   %s\ndatabase: %s\nstate:    %s\n", d ? d : "(none)", db ? db : "(none)",
           state);
    const char *sd = NULL, *sstate = NULL;
    jitk_cache_shared_location(e, &sd, &sstate);
    if (sd != NULL) printf("shared:   %s\nshared state: %s\n", sd, sstate);
  } else if (strcmp(sub, "stats") == 0) {
    jitk_cache_stats all;
    st = jitk_cache_get_stats(e, NULL, &all);
    if (st != JITK_OK) {
      rc = fail(e, st, "cache stats");
    } else if (json) {
      printf(
          "{\"entries\": %llu, \"bytes\": %llu, \"max_bytes\": %lld, "
          "\"memory_hits\": %llu, \"disk_hits\": %llu, \"misses\": %llu, "
          "\"compiles\": %llu, \"compile_ms\": %.3f, \"corrupt\": %llu, "
          "\"evictions\": %llu}\n",
          (unsigned long long)all.entries, (unsigned long long)all.bytes, (long long)all.max_bytes,
          (unsigned long long)all.memory_hits, (unsigned long long)all.disk_hits,
          (unsigned long long)all.misses, (unsigned long long)all.compiles, all.compile_ms,
          (unsigned long long)all.corrupt, (unsigned long long)all.evictions);
    } else {
      char size[32], cap[32];
      human_bytes((size_t)all.bytes, size, sizeof size);
      human_bytes((size_t)all.max_bytes, cap, sizeof cap);
      printf("entries:      %llu (%s of %s)\n", (unsigned long long)all.entries, size, cap);
      printf("memory hits:  %llu\ndisk hits:    %llu\nmisses:       %llu\n",
             (unsigned long long)all.memory_hits, (unsigned long long)all.disk_hits,
             (unsigned long long)all.misses);
      printf("compiles:     %llu (%.1f s of NVRTC)\n", (unsigned long long)all.compiles,
             all.compile_ms / 1000.0);
      printf("corrupt:      %llu removed\nevictions:    %llu\n", (unsigned long long)all.corrupt,
             (unsigned long long)all.evictions);
      /* The remote tier's counters over every process, when there is a
       * remote or ever was one. */
      jitk_cache_remote_info ra;
      jitk_cache_remote_info_init(&ra);
      if (jitk_cache_remote_get_info(e, NULL, &ra) == JITK_OK &&
          (ra.url != NULL || ra.hits + ra.misses + ra.errors > 0)) {
        char in[32], out[32];
        human_bytes((size_t)ra.bytes_read, in, sizeof in);
        human_bytes((size_t)ra.bytes_written, out, sizeof out);
        printf("remote:       %s (%s%s)\n", ra.url ? ra.url : "none now", ra.state,
               ra.signed_entries ? "; entries signed" : "");
        printf(
            "remote hits:  %llu\nremote misses: %llu\nremote errors: %llu (%llu entries "
            "rejected)\nremote bytes: %s read, %s written\n",
            (unsigned long long)ra.hits, (unsigned long long)ra.misses,
            (unsigned long long)ra.errors, (unsigned long long)ra.rejected, in, out);
      }
    }
  } else if (strcmp(sub, "ls") == 0) {
    int n = 0;
    st = jitk_cache_list(e, print_entry, &n);
    if (st != JITK_OK)
      rc = fail(e, st, "cache ls");
    else if (n == 0)
      printf("the cache is empty\n");
  } else if (strcmp(sub, "verify") == 0) {
    size_t checked = 0, removed = 0;
    st = jitk_cache_verify(e, &checked, &removed);
    if (st != JITK_OK)
      rc = fail(e, st, "cache verify");
    else
      printf("checked %zu entr%s, removed %zu bad\n", checked, checked == 1 ? "y" : "ies", removed);
  } else if (strcmp(sub, "prune") == 0) {
    size_t removed = 0;
    st = jitk_cache_prune(e, (int64_t)max_size, &removed);
    if (st != JITK_OK)
      rc = fail(e, st, "cache prune");
    else
      printf("removed %zu entr%s\n", removed, removed == 1 ? "y" : "ies");
  } else if (strcmp(sub, "clear") == 0) {
    size_t removed = 0;
    st = jitk_cache_clear(e, &removed);
    if (st != JITK_OK)
      rc = fail(e, st, "cache clear");
    else
      printf("removed %zu entr%s\n", removed, removed == 1 ? "y" : "ies");
  } else if (strcmp(sub, "export") == 0) {
    size_t n = 0;
    st = jitk_cache_export(e, file, &n);
    if (st != JITK_OK)
      rc = fail(e, st, "cache export");
    else
      printf("exported %zu entr%s to %s\n", n, n == 1 ? "y" : "ies", file);
  } else if (strcmp(sub, "publish") == 0) {
    size_t n = 0;
    st = jitk_cache_publish(e, file, &n);
    if (st != JITK_OK)
      rc = fail(e, st, "cache publish");
    else
      printf("published %zu new entr%s to %s\n", n, n == 1 ? "y" : "ies", file);
  } else if (strcmp(sub, "push") == 0) {
    size_t n = 0;
    st = jitk_cache_remote_push(e, &n);
    if (st != JITK_OK)
      rc = fail(e, st, "cache push");
    else
      printf("pushed %zu entr%s to the remote\n", n, n == 1 ? "y" : "ies");
  } else if (strcmp(sub, "pull") == 0) {
    size_t n = 0, bad = 0;
    st = jitk_cache_remote_pull(e, &n, &bad);
    if (st != JITK_OK)
      rc = fail(e, st, "cache pull");
    else
      printf("pulled %zu entr%s from the remote, rejected %zu that failed verification\n", n,
             n == 1 ? "y" : "ies", bad);
  } else if (strcmp(sub, "import") == 0) {
    size_t n = 0, bad = 0;
    st = jitk_cache_import(e, file, &n, &bad);
    if (st != JITK_OK)
      rc = fail(e, st, "cache import");
    else
      printf("imported %zu entr%s from %s, rejected %zu that failed verification\n", n,
             n == 1 ? "y" : "ies", file, bad);
  }
  jitk_engine_destroy(e);
  return rc;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "doctor") == 0) return cmd_doctor(argc - 2, argv + 2);
  if (strcmp(cmd, "compile") == 0) return cmd_compile(argc - 2, argv + 2);
  if (strcmp(cmd, "cache") == 0) return cmd_cache(argc - 2, argv + 2);
  if (strcmp(cmd, "version") == 0 || strcmp(cmd, "--version") == 0) {
    printf("jitk %s\n", jitk_version());
    return 0;
  }
  if (strcmp(cmd, "help") == 0 || strcmp(cmd, "--help") == 0 || strcmp(cmd, "-h") == 0) {
    usage_main(stdout);
    return 0;
  }
  fprintf(stderr, "%s: unknown command '%s'\n", prog, cmd);
  usage_main(stderr);
  return EXIT_USAGE;
}
