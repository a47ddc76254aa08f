/*
 * The NVRTC wrapper: target choice, default options, header discovery,
 * compiling to a cubin or PTX, lowered names and ptxas's resource report.
 */
#ifndef JITK_SRC_NVRTC_NVRTC_H
#define JITK_SRC_NVRTC_NVRTC_H

#include <nvrtc.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jitk/jitk.h>

#include "base/base.h"

/* The NVRTC entry points jitk uses. They live in a table on the engine so
 * that tests can make any one of them fail. */
#define JK_NVRTC_FUNCS(X)      \
  X(nvrtcGetErrorString)       \
  X(nvrtcVersion)              \
  X(nvrtcGetNumSupportedArchs) \
  X(nvrtcGetSupportedArchs)    \
  X(nvrtcCreateProgram)        \
  X(nvrtcDestroyProgram)       \
  X(nvrtcCompileProgram)       \
  X(nvrtcGetProgramLogSize)    \
  X(nvrtcGetProgramLog)        \
  X(nvrtcGetPTXSize)           \
  X(nvrtcGetPTX)               \
  X(nvrtcGetCUBINSize)         \
  X(nvrtcGetCUBIN)             \
  X(nvrtcGetLTOIRSize)         \
  X(nvrtcGetLTOIR)             \
  X(nvrtcAddNameExpression)    \
  X(nvrtcGetLoweredName)

/* NVRTC's precompiled-header entry points (CUDA 12.8 and newer), with
 * their prototypes written here: an older nvrtc.h does not declare them
 * and an older libnvrtc does not have them, so pch.c looks them up in the
 * loaded library and leaves NULL where they are missing. Same table, so
 * tests can make them fail too. */
#define JK_NVRTC_PCH_FUNCS(X)                                             \
  X(nvrtcGetPCHHeapSize, nvrtcResult (*)(size_t *))                       \
  X(nvrtcSetPCHHeapSize, nvrtcResult (*)(size_t))                         \
  X(nvrtcGetPCHCreateStatus, nvrtcResult (*)(nvrtcProgram))               \
  X(nvrtcGetPCHHeapSizeRequired, nvrtcResult (*)(nvrtcProgram, size_t *)) \
  X(nvrtcSetFlowCallback, nvrtcResult (*)(nvrtcProgram, int (*)(void *, void *), void *))

/* nvrtcGetPCHCreateStatus's answers, as nvrtc.h of CUDA 12.8 numbers them
 * (an older nvrtc.h has no names for them). */
enum {
  JK_NVRTC_NO_PCH_CREATE_ATTEMPTED = 13,
  JK_NVRTC_PCH_CREATE_HEAP_EXHAUSTED = 14,
  JK_NVRTC_PCH_CREATE = 15
};

/* One header state's precompiled header (pch.c). */
typedef struct jk_pch_state {
  uint8_t key[16];
  char status;   /* 'M' being made, 'R' ready, 'N' to be made again, 'X' never */
  uint8_t tries; /* files made for it that could then not be loaded */
} jk_pch_state;

/* The engine's precompiled headers (pch.c). */
typedef struct jk_pch {
  /* Fixed at engine creation. */
  char *root; /* the trusted <cache>/pch, a real path; NULL when off */
  void *lib;  /* dlopen's handle on the loaded NVRTC, for the lookups */
  /* Bounds and choices, which tests change. */
  size_t heap_max;         /* the largest heap jitk asks NVRTC for */
  uint64_t max_bytes;      /* the files an engine keeps at once */
  size_t min_header_bytes; /* headers read from disk that make it worth it */
  bool ahead;              /* made on a thread of their own, beside the compile */
  /* The rest under `lock`. */
  pthread_mutex_t lock;
  int mode;        /* JITK_PCH_OFF, JITK_PCH_ON or JITK_PCH_ALL */
  char state[512]; /* "on", or "off: " and why */
  char *dir;       /* the engine's folder under root, made at first use */
  int owner;       /* the process that made `dir` (a forked child makes its own) */
  bool warned;     /* the one log line about a problem is spent */
  unsigned heap_growths;
  jk_pch_state *states;
  size_t num_states, cap_states;
  /* The thread making one, and what tells it to stop (read by NVRTC's
   * flow callback on that thread, hence atomic). */
  pthread_t maker;
  bool maker_started, making;
  int stop;
  uint64_t compiles, created, used, failed, bytes;
} jk_pch;

#define JK_MAX_ARCHS 64

/* nvJitLink's entry points (link.c), opened with dlopen: its handle is an
 * opaque pointer and its results and input kinds are ints, as nvJitLink.h
 * declares them. */
typedef struct jk_jitlink {
  void *handle; /* dlopen's; NULL while nvJitLink is not loaded */
  char *path;   /* the file loaded */
  unsigned major, minor;
  int (*create)(void **link, uint32_t num_options, const char **options);
  int (*destroy)(void **link);
  int (*add_data)(void *link, int kind, const void *data, size_t size, const char *name);
  int (*complete)(void *link);
  int (*cubin_size)(void *link, size_t *size);
  int (*cubin)(void *link, void *cubin);
  int (*error_log_size)(void *link, size_t *size);
  int (*error_log)(void *link, char *log);
  int (*info_log_size)(void *link, size_t *size);
  int (*info_log)(void *link, char *log);
  int (*version)(unsigned *major, unsigned *minor); /* NULL before CUDA 12.3 */
} jk_jitlink;

typedef struct jk_nvrtc {
#define JK_NVRTC_FIELD_(name) __typeof__(&name) name; /* NOLINT(bugprone-macro-parentheses) */
  JK_NVRTC_FUNCS(JK_NVRTC_FIELD_)
#undef JK_NVRTC_FIELD_
#define JK_NVRTC_PCH_FIELD_(name, type) \
  __typeof__(type) name; /* NOLINT(bugprone-macro-parentheses) */
  JK_NVRTC_PCH_FUNCS(JK_NVRTC_PCH_FIELD_)
#undef JK_NVRTC_PCH_FIELD_
  int major, minor;
  int archs[JK_MAX_ARCHS]; /* supported sm numbers, ascending: 75, 80 ... */
  int num_archs;
  char *include_dir; /* CUDA headers, or NULL when none were found */
  char *cccl_dir;    /* include_dir/cccl when it exists (CUDA 13) */
  /* What the CUDA headers' directives do, recorded at their first scan in
   * this engine (deps.c), under scan_lock. */
  struct jk_scan_memo *scan_memo;
  pthread_mutex_t scan_lock;
  /* The linker of relocatable device code (link.c), looked for at the
   * first compile that needs it, under link_lock. */
  pthread_mutex_t link_lock;
  bool link_probed;
  jk_jitlink jitlink;
  char *jitlink_why; /* where nvJitLink was looked for, when not found */
  /* For tests: behave as if nvJitLink were missing, and search these
   * folders (NULL-terminated) for libcudadevrt.a instead of the usual
   * ones. Set before the first compile. */
  bool no_jitlink;
  const char *const *devrt_dirs;
  /* Precompiled headers (pch.c). */
  jk_pch pch;
  /* Set when this NVRTC refused --no-cache (nvrtc.c, own_cache_off), and
   * when this nvJitLink refused -no-cache (link.c, jitlink_create). */
  atomic_bool no_cache_refused;
  atomic_bool jitlink_no_cache_refused;
} jk_nvrtc;

struct jk_target;

/* Fills the function table with the linked NVRTC and reads its version and
 * supported architectures. */
jitk_status jk_nvrtc_init(jitk_engine *e, jk_nvrtc *nv, const char *include_override);
void jk_nvrtc_destroy(jitk_engine *e, jk_nvrtc *nv);

/*
 * Parses a target name ("sm_90", "sm_90a", "compute_90") into *t, checking
 * it against NVRTC's supported list. JITK_ERR_INVALID_ARGUMENT for a
 * malformed name, JITK_ERR_UNSUPPORTED for one NVRTC cannot target.
 */
jitk_status jk_target_parse(jitk_engine *e, const char *arch, struct jk_target *t);

/* The target for a device of compute capability major.minor: its sm_XY
 * when NVRTC supports it, PTX for the newest compute_XY below it
 * otherwise. JITK_ERR_UNSUPPORTED when the device is older than NVRTC's
 * oldest target. */
jitk_status jk_target_for_device(jitk_engine *e, int major, int minor, struct jk_target *t);

/* --- deps.c: the files a compile reads --- */

/* One path a compile's lookups touched. */
typedef struct jk_dep {
  char *path;   /* as NVRTC opens it: relative to the working directory, or absolute */
  char state;   /* 'F' a regular file, 'A' nothing there, 'O' something else */
  bool hashed;  /* `hash` holds the file's XXH3-128 */
  bool toolkit; /* under the CUDA header folders (not checked on memory hits) */
  /* For a file this process's scan read, or a CUDA header it replayed:
   * what fstat said as the file was opened, for jk_deps_unchanged. Not
   * part of the record the cache keeps. */
  bool stamped;
  uint8_t hash[16];
  jk_file_stamp stamp;
} jk_dep;

typedef struct jk_deps {
  jk_dep *v;
  size_t n, cap;
  /* NULL, or why the files the compile reads cannot all be known (a
   * header named by a macro, precompiled headers); allocated. */
  char *unknown;
} jk_deps;

struct jk_link_input;

/* What NVRTC's output is for: a program loaded as it is, or one piece of
 * a linked program (compiled as relocatable code and not linked with the
 * device runtime here: the program's link does that). */
typedef enum jk_piece_output {
  JK_OUTPUT_PROGRAM = 0,
  JK_OUTPUT_RELOCATABLE, /* a relocatable cubin */
  JK_OUTPUT_LTO_IR       /* LTO-IR (-dlto) */
} jk_piece_output;

typedef struct jk_compile_input {
  const char *source;
  const char *program_name; /* NULL: "module.cu" */
  const char *const *options;
  size_t num_options;
  const char *const *name_expressions;
  size_t num_name_expressions;
  const jitk_header *headers;
  size_t num_headers;
  /* Text placed before NVRTC's log in the error message; NULL for raw
   * modules. Generators use it to say what they were building. */
  const char *what;
  /* Generated source: rewrite the log's errors in the user's sections as
   * section:LINE:COL (jk_rewrite_log), and say how to see the source. */
  bool rewrite_log;
  /* Compile for the target's arch-specific variant ("sm_90a" for an
   * "sm_90" engine), whose instructions (wgmma, setmaxnreg) run on exactly
   * that chip. Only for cubin targets; the engine's device is that chip. */
  bool arch_specific;
  jk_piece_output output;
  /* A linked program (jitk_module_link): the pieces, compiled and linked
   * by jk_link_program; `source`, `options` and `headers` are unused, and
   * `name_expressions` are those of every CUDA piece in order. */
  const struct jk_link_input *link;
} jk_compile_input;

typedef struct jk_compile_output {
  void *image; /* cubin, NUL-terminated PTX, or LTO-IR for JK_OUTPUT_LTO_IR */
  size_t image_size;
  bool ptx;
  char *log;      /* NVRTC's log, never NULL after success */
  char **lowered; /* one per name expression */
  size_t num_lowered;
  double milliseconds; /* NVRTC's compile time, and the link's */
  /* What a link with the CUDA device runtime read (link.c): every place
   * searched for libcudadevrt.a; empty without one. */
  jk_deps deps;
} jk_compile_output;

/* How jk_nvrtc_final_options completes the caller's options. */
enum {
  JK_FINAL_ARCH_SPECIFIC = 1u, /* the target's "a" variant (sm_90a) */
  JK_FINAL_LTO_IR = 2u         /* "-dlto": LTO-IR for a piece of a linked program */
};
/* The flags for a compile input. */
unsigned jk_final_flags(const jk_compile_input *in);

/*
 * The options NVRTC receives: the caller's, then "-std=c++17" unless one
 * is given, the engine's target unless one is given, "--ptxas-options=-v"
 * for cubins, "-dlto" with JK_FINAL_LTO_IR, and -I for the CUDA and CCCL
 * headers. A caller's own -dlto (and other options that make no loadable
 * image) is refused. The returned array and its strings are allocated;
 * free with jk_options_free.
 */
jitk_status jk_nvrtc_final_options(jitk_engine *e, const char *const *options, size_t num_options,
                                   unsigned flags, char ***out, size_t *num_out);
void jk_options_free(jitk_engine *e, char **options, size_t num);

/* Compiles for the engine's target. JITK_ERR_COMPILE with NVRTC's log and
 * the options in the message when the source does not compile. */
jitk_status jk_nvrtc_compile(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out);
void jk_compile_output_free(jitk_engine *e, jk_compile_output *out);

/* The headers under templates/, embedded at build time. */
typedef struct jk_embedded_file {
  const char *name; /* "jitk/array.cuh" */
  const unsigned char *data;
  size_t size;
} jk_embedded_file;
extern const jk_embedded_file jk_embedded_headers[];
extern const size_t jk_num_embedded_headers;

/* Parses ptxas's "-v" report in an NVRTC log into one entry per kernel,
 * in the order ptxas compiled them. Free with jk_ptxas_free. */
jitk_status jk_ptxas_parse(jitk_engine *e, const char *log, jitk_kernel_resources **out,
                           size_t *count);
void jk_ptxas_free(jitk_engine *e, jitk_kernel_resources *res, size_t count);

/* --- deps.c, continued --- */

/*
 * The version of the scan below, part of every cache key (key.c): an
 * entry's dependency record is only as complete as the scan that made it,
 * so entries recorded by an older scan, which may have missed a file
 * NVRTC read, are never served once jitk is upgraded. Bump it with every
 * fix to what the scan records (1 was the scan before the version; 2
 * reads options as NVRTC does; 3 follows every spelling of a folder).
 */
#define JK_DEPS_SCANNER_VERSION 3

/*
 * Lists every path the compile of `in` with the final options `opts`
 * (jk_nvrtc_final_options: each as NVRTC reads it, so the folders named
 * are the ones NVRTC searches) would look at for headers, with the
 * content hash of each file found
 * (deps.c says how the lookup is modelled). Files that cannot be read
 * count as "something else". Fails only for want of memory.
 */
jitk_status jk_deps_scan(jitk_engine *e, const jk_compile_input *in, char **opts, size_t nopts,
                         jk_deps *out);
void jk_deps_free(jitk_engine *e, jk_deps *d);
/* Whether every file the scan read (the CUDA headers among them) is
 * still the file it read: same device, inode, size and modification and
 * change times. A file edited while NVRTC ran and then put back as it was has the
 * scan's content again, but not its change time: what NVRTC read is then
 * unknown. Places found empty or holding something else are checked as
 * they were found. *failed names the first that does not hold. */
bool jk_deps_unchanged(const jk_deps *d, const char **failed);
typedef struct jk_scan_memo jk_scan_memo;
void jk_deps_memo_free(jitk_engine *e, jk_scan_memo *m);
/* XXH3-128 in canonical (big-endian) bytes, as dependency records hold. */
void jk_deps_hash(const void *data, size_t n, uint8_t out[16]);

/* The loaded libnvrtc and the libnvrtc-builtins it will use, allocated;
 * either is NULL when it cannot be found. */
jitk_status jk_nvrtc_library_files(jitk_engine *e, char **nvrtc_path, char **builtins_path);
/* The build IDs of those libraries as this process has them loaded
 * (loaded[i] false where one is not: the builtins until NVRTC's first
 * compile). Index 0 is libnvrtc, 1 libnvrtc-builtins. */
void jk_nvrtc_loaded_build_ids(const jitk_engine *e, jk_build_id ids[2], bool loaded[2]);

/* --- pch.c: NVRTC's precompiled headers --- */

/* Sets up the engine's state and looks the entry points up in the loaded
 * NVRTC (jk_nvrtc_init); NULL where it has none. */
void jk_pch_resolve(jk_nvrtc *nv);
/* Whether the loaded NVRTC has every precompiled-header entry point. */
bool jk_pch_available(const jk_nvrtc *nv);
/* Turns precompiled headers on for the engine, their files going under
 * `root` (a real path the cache's trust rules accepted; taken over), or
 * off (root NULL) because of `why`. Called once, at engine creation. */
void jk_pch_configure(jitk_engine *e, int mode, char *root, const char *why);
/* Removes the engine's folder and frees what pch.c kept (engine destroy). */
void jk_pch_destroy(jitk_engine *e, jk_nvrtc *nv);

/* What one compile does with precompiled headers. */
typedef struct jk_pch_use {
  char kind;         /* 0 nothing, 'c' creates the file, 'u' loads it */
  uint8_t key[16];   /* the header state (pch.c says what it covers) */
  char *file;        /* the state's file */
  char *file_option; /* "--create-pch=<file>" or "--use-pch=<file>" */
  const char *options[6];
  size_t num_options;
  jk_deps read; /* 'c': what the state's key was made from (pch.c) */
} jk_pch_use;

/* Decides whether the compile of `in`, with the final options `opts` and
 * the headers NVRTC is given as strings, offers NVRTC precompiled headers,
 * and fills `use` with the options to add after `opts`. Never fails: any
 * problem means a plain compile. */
void jk_pch_begin(jitk_engine *e, const jk_compile_input *in, char **opts, size_t nopts,
                  const char *const *hname, const char *const *hsrc, size_t nh, jk_pch_use *use);
/* After the compile of program `pname`: counts what NVRTC made or loaded,
 * grows NVRTC's heap when it was too small, and takes NVRTC's messages
 * about precompiled headers out of `log` (may be NULL). `prog` NULL: the
 * program was not compiled. */
void jk_pch_end(jitk_engine *e, jk_pch_use *use, const char *pname, nvrtcProgram prog, char *log);
/* Whether a compile that ended with `r` and `log` while offered
 * precompiled headers is to be run again without them. */
bool jk_pch_retry_plain(const jk_pch_use *use, nvrtcResult r, const char *log);
/* A compile failed with precompiled headers and passed without: off for
 * the engine, with one log line. */
void jk_pch_blame(jitk_engine *e, nvrtcResult r);
void jk_pch_use_free(jitk_engine *e, jk_pch_use *use);

/* --- link.c: relocatable device code and the CUDA device runtime --- */

/* Whether the options ask for relocatable device code (-dc, --device-c,
 * -rdc=true, --relocatable-device-code=true; the last of them and their
 * =false forms decides), which must be linked with libcudadevrt. */
bool jk_options_rdc(const char *const *options, size_t n);

/* An option as NVRTC reads it: without the white space it drops at both
 * ends of every option (" -arch=sm_80" and "-Iinc\t" mean "-arch=sm_80"
 * and "-Iinc"; measured with NVRTC 13.0). Returns where it starts, its
 * length in *len. Every check of the caller's options reads them so, or
 * one spelled with a space would pass a check NVRTC then obeys. */
const char *jk_option_trim(const char *option, size_t *len);

typedef enum jk_linker {
  JK_LINKER_NONE = 0,
  JK_LINKER_NVJITLINK, /* cubin targets, with or without a device */
  JK_LINKER_DRIVER     /* cuLink*, on an engine with a device */
} jk_linker;

/* Which linker the engine's relocatable code goes through; loads
 * nvJitLink at the first call. */
jk_linker jk_link_probe(jitk_engine *e);
/* Frees what the engine's probe kept (engine destroy); nvJitLink itself
 * stays loaded (link.c says why). */
void jk_link_release(jitk_engine *e);

/* The folders searched for libcudadevrt.a, in order, one per line
 * (allocated): part of the cache key of relocatable programs, so that a
 * search elsewhere (another CUDA_HOME) is another request. */
jitk_status jk_devrt_search_dirs(jitk_engine *e, char **out);

/*
 * Finds libcudadevrt.a in the first folder of the search that has it and
 * reads it whole (*data, *size, allocated; *path too). Every place looked
 * at goes into `deps`: nothing there, something not a file, or the file
 * with the XXH3-128 of the bytes read. JITK_ERR_UNSUPPORTED naming every
 * folder when none has it.
 */
jitk_status jk_find_devrt(jitk_engine *e, jk_deps *deps, char **path, void **data, size_t *size);

/*
 * Links NVRTC's relocatable output in `out` with libcudadevrt: through
 * nvJitLink for cubin targets, else through the driver on an engine with
 * a device. The linked cubin replaces out->image (out->ptx becomes false);
 * out->deps records the search. JITK_ERR_UNSUPPORTED when no linker or no
 * libcudadevrt.a is available, saying where they were looked for and
 * what to install; JITK_ERR_COMPILE with the linker's log when the
 * program does not link.
 */
jitk_status jk_link_devrt(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out);

/* Moves every record of `from` to the end of `to`; `from` is left empty. */
jitk_status jk_deps_move(jitk_engine *e, jk_deps *to, jk_deps *from);

/* Finds the CUDA include folder as jitk_engine_config describes. Returns
 * an allocated path or NULL. */
char *jk_find_cuda_include(jitk_engine *e, const char *override);

/*
 * NVRTC's log with errors in the user's sections rewritten in a compiler's
 * style: "operation(1): error: ..." followed by the source line and a caret
 * becomes "operation:1:7: error: ...", the column taken from the caret
 * (log.c). NULL when out of memory.
 */
char *jk_rewrite_log(jitk_engine *e, const char *log);

/* Whether s[0, n) names one of the user's sections that the generators
 * put under #line ("operation", "map_expr", ...), whose messages
 * jk_rewrite_log rewrites (log.c). */
bool jk_log_user_label(const char *s, size_t n);

/* --- link.c: programs linked from several pieces (jitk_module_link) --- */

/* One piece as jk_link_program takes it: binary pieces by their bytes
 * (read from files already), CUDA ones by their compile input. */
typedef struct jk_link_piece {
  jitk_link_kind kind;
  const void *data; /* binary pieces; PTX need not end in a NUL */
  size_t size;
  const char *name;
  /* JITK_LINK_CUDA: the source and its options as the caller gave them;
   * jk_link_piece_input adds what a piece needs. */
  const jk_compile_input *cuda;
} jk_link_piece;

typedef struct jk_link_input {
  const jk_link_piece *pieces;
  size_t num_pieces;
  bool lto;
  const char *const *options; /* nvJitLink's, the caller's */
  size_t num_options;
} jk_link_input;

/* A CUDA piece's compile input as the link compiles it: the caller's
 * options with "-rdc=true" added, in `storage`
 * (allocated; free it with jk_free), and the output set. The key and the
 * dependency scan use it too, so that all three see the same options. */
jitk_status jk_link_piece_input(jitk_engine *e, const jk_compile_input *cuda, bool lto,
                                jk_compile_input *out, const char ***storage);

/*
 * Compiles the CUDA pieces of in->link and links every piece with
 * nvJitLink for the engine's target. out->image is the linked cubin,
 * out->log the pieces' NVRTC logs and the linker's, out->lowered the
 * lowered names of every CUDA piece's name expressions in order, out->deps
 * the device runtime's search when a piece asks for it.
 */
jitk_status jk_link_program(jitk_engine *e, const jk_compile_input *in, jk_compile_output *out);

#endif
