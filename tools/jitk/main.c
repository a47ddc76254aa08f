/*
 * The jitk command: `jitk doctor` describes the machine, `jitk compile`
 * compiles CUDA source without needing a GPU. Exit status: 0 success, 1 a
 * failure jitk reported, 2 a usage error.
 */
#include <jitk/jitk.h>

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EXIT_USAGE 2

static const char *prog = "jitk";

static void usage_main(FILE *out) {
  fprintf(out,
          "usage: %s <command> [options]\n"
          "\n"
          "commands:\n"
          "  doctor    report the driver, NVRTC, CUDA headers and devices\n"
          "  compile   compile a CUDA source file to a cubin or PTX\n"
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
          "  --option OPT             any other NVRTC option; repeatable\n",
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
    printf("  device %d: %s, compute capability %d.%d, %d SMs, %s memory, "
           "%s L2, %s shared per block (opt-in)\n",
           d, info.name, info.cc_major, info.cc_minor, info.multiprocessors, mem,
           l2, smem);
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

static int cmd_compile(int argc, char **argv) {
  const char *input = NULL, *output = NULL, *arch = NULL;
  int ptx = 0;
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

  /* Choose the target: the one asked for, else the GPU's, else sm_90. */
  char target[32];
  jitk_engine_config cfg;
  jitk_engine_config_init(&cfg);
  cfg.device = JITK_DEVICE_NONE;
  if (arch == NULL) {
    jitk_device_info info;
    if (jitk_device_query(NULL, 0, &info) == JITK_OK) {
      snprintf(target, sizeof target, "sm_%d%d", info.cc_major, info.cc_minor);
    } else {
      snprintf(target, sizeof target, "sm_90");
      fprintf(stderr, "%s compile: no GPU found; compiling for sm_90 (--arch to choose)\n",
              prog);
    }
  } else {
    snprintf(target, sizeof target, "%s", arch);
  }
  if (ptx && strncmp(target, "sm_", 3) == 0) {
    /* sm_90 becomes compute_90: shift the digits right by five bytes. */
    size_t len = strlen(target);
    if (len + 5 < sizeof target) {
      memmove(target + 8, target + 3, len - 2);
      memcpy(target, "compute_", 8);
    }
  }
  cfg.arch = target;

  jitk_engine *e = NULL;
  jitk_module *m = NULL;
  char *out_path = NULL;
  jitk_status st = jitk_engine_create(&cfg, &e);
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
  printf("%s: %zu bytes of %s for %s\n", dest, image_size,
         kind == JITK_IMAGE_PTX ? "PTX" : "cubin", target);

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
             res[i].shared_bytes, res[i].stack_bytes, res[i].spill_stores,
             res[i].spill_loads);
    }
  } else if (kind == JITK_IMAGE_PTX) {
    printf("(PTX: registers and spills are decided when the driver compiles it)\n");
    for (int i = 0; lowered_of && i < nexpr; i++)
      printf("%s -> %s\n", exprs[i], lowered_of[i] ? lowered_of[i] : "?");
  }
  free(lowered_of);

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

int main(int argc, char **argv) {
  if (argc < 2) {
    usage_main(stderr);
    return EXIT_USAGE;
  }
  const char *cmd = argv[1];
  if (strcmp(cmd, "doctor") == 0) return cmd_doctor(argc - 2, argv + 2);
  if (strcmp(cmd, "compile") == 0) return cmd_compile(argc - 2, argv + 2);
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
