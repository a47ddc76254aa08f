/*
 * libFuzzer target for the reader of ptxas's "-v" report in NVRTC's log
 * (jk_ptxas_parse), which fills jitk_module_resources.
 *
 * The input is the log text (up to its first NUL). Promises checked: no
 * crash, leak or out-of-bounds read; the parse succeeds (the report is
 * advisory: text it does not know is skipped); there is one entry per
 * "Compiling entry function '...'" line with its closing quote on the same
 * line, in order, named by the text between the quotes; no entry is
 * returned when the log names no kernel.
 */
#include <jitk/jitk.h>

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "engine.h"
#include "fuzz_common.h"

static jitk_engine *engine;

int LLVMFuzzerInitialize(int *argc, char ***argv) {
  (void)argc;
  (void)argv;
  engine = jf_engine("fuzz_ptxas");
  return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  char *log = malloc(size + 1);
  if (log == NULL) return 0;
  memcpy(log, data, size);
  log[size] = '\0';
  jitk_kernel_resources *res = (jitk_kernel_resources *)(void *)&engine;
  size_t count = 12345;
  jitk_status st = jk_ptxas_parse(engine, log, &res, &count);
  JF_CHECK(st == JITK_OK, "jk_ptxas_parse failed with %s: %s", jitk_errname(st),
           jitk_errmsg(engine));
  JF_CHECK(count == 0 || res != NULL, "%zu entries without an array", count);

  /* The entries, found again line by line the simple way. */
  static const char entry[] = "Compiling entry function '";
  size_t i = 0;
  for (const char *line = log; *line;) {
    const char *end = strchr(line, '\n');
    if (end == NULL) end = line + strlen(line);
    size_t len = (size_t)(end - line);
    const char *p = memmem(line, len, entry, sizeof entry - 1);
    if (p != NULL) {
      p += sizeof entry - 1;
      const char *q = memchr(p, '\'', (size_t)(end - p));
      if (q != NULL) {
        JF_CHECK(i < count, "only %zu entries for a log naming more kernels", count);
        JF_CHECK(
            strlen(res[i].name) == (size_t)(q - p) && memcmp(res[i].name, p, (size_t)(q - p)) == 0,
            "entry %zu is named \"%s\", not \"%.*s\"", i, res[i].name, (int)(q - p), p);
        i++;
      }
    }
    line = *end ? end + 1 : end;
  }
  JF_CHECK(i == count, "%zu entries for a log naming %zu kernels", count, i);
  for (size_t k = 0; k < count; k++)
    JF_CHECK(res[k].registers >= 0, "entry %zu has %d registers", k, res[k].registers);
  jk_ptxas_free(engine, res, count);
  free(log);
  return 0;
}
