/* Build IDs read from loaded libraries and from files: the same library
 * gives the same ID both ways, and any file that is not a well-formed
 * ELF file gives a clean answer, never a read past what it holds. */
#include <dlfcn.h>
#include <elf.h>
#include <nvrtc.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"
#include "common.h"

static char *scratch_file(const void *bytes, size_t n) {
  char *path = strdup("/tmp/jitk-build-id-XXXXXX");
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  cr_assert_eq(write(fd, bytes, n), (ssize_t)n);
  close(fd);
  return path;
}

/* A 64-bit ELF header with one PT_NOTE program header whose notes are
 * `notes` (n bytes), followed by them. */
static char *elf_with_notes(const void *notes, size_t n, uint64_t align) {
  unsigned char file[4096];
  memset(file, 0, sizeof file);
  Elf64_Ehdr eh;
  memset(&eh, 0, sizeof eh);
  memcpy(eh.e_ident, ELFMAG, SELFMAG);
  eh.e_ident[EI_CLASS] = ELFCLASS64;
  eh.e_ident[EI_DATA] = ELFDATA2LSB;
  eh.e_type = ET_DYN;
  eh.e_phoff = sizeof eh;
  eh.e_phentsize = sizeof(Elf64_Phdr);
  eh.e_phnum = 1;
  Elf64_Phdr ph;
  memset(&ph, 0, sizeof ph);
  ph.p_type = PT_NOTE;
  ph.p_offset = sizeof eh + sizeof ph;
  ph.p_filesz = ph.p_memsz = n;
  ph.p_align = align;
  memcpy(file, &eh, sizeof eh);
  memcpy(file + sizeof eh, &ph, sizeof ph);
  memcpy(file + ph.p_offset, notes, n);
  return scratch_file(file, ph.p_offset + n);
}

/* One note: header, name padded to 4, descriptor. */
static size_t note(unsigned char *out, uint32_t type, const char *name, const void *desc,
                   uint32_t desc_len) {
  Elf64_Nhdr h = {(uint32_t)strlen(name) + 1, desc_len, type};
  size_t at = sizeof h;
  memcpy(out, &h, sizeof h);
  memcpy(out + at, name, h.n_namesz);
  at += (h.n_namesz + 3) / 4 * 4;
  memcpy(out + at, desc, desc_len);
  return at + (desc_len + 3) / 4 * 4;
}

Test(build_id, a_loaded_library_and_its_file_agree) {
  Dl_info info;
  cr_assert_neq(dladdr((void *)&nvrtcVersion, &info), 0);
  jk_build_id loaded, by_name, file;
  cr_assert(jk_loaded_build_id((void *)&nvrtcVersion, NULL, &loaded));
  cr_assert_gt(loaded.n, 0, "libnvrtc has no build ID");
  cr_assert(jk_loaded_build_id(NULL, strrchr(info.dli_fname, '/') + 1, &by_name));
  cr_assert(jk_file_build_id(info.dli_fname, &file));
  cr_assert(jk_build_id_same(&loaded, &file));
  cr_assert(jk_build_id_same(&loaded, &by_name));
  /* A name matches whole file names only. */
  cr_assert_not(jk_loaded_build_id(NULL, "nvrtc.so.13", &by_name));
  cr_assert_not(jk_loaded_build_id(NULL, "libjitk-no-such-library.so", &by_name));
  cr_assert_eq(by_name.n, 0);
}

Test(build_id, notes_are_read_within_their_segment) {
  unsigned char notes[512];
  const unsigned char id[8] = {1, 2, 3, 4, 5, 6, 7, 8};
  /* Another note first, then the build ID. */
  size_t n = note(notes, 1, "GNU", "abcd", 4);
  n += note(notes + n, NT_GNU_BUILD_ID, "GNU", id, sizeof id);
  char *path = elf_with_notes(notes, n, 4);
  jk_build_id got;
  cr_assert(jk_file_build_id(path, &got));
  cr_assert_eq(got.n, 8);
  cr_assert_arr_eq(got.bytes, id, 8);
  unlink(path);
  free(path);
  /* A build ID under another owner's name is not one. */
  n = note(notes, NT_GNU_BUILD_ID, "XYZ", id, sizeof id);
  path = elf_with_notes(notes, n, 4);
  cr_assert(jk_file_build_id(path, &got));
  cr_assert_eq(got.n, 0);
  unlink(path);
  free(path);
  /* Sizes that run past the segment: the note is dropped whole. */
  Elf64_Nhdr lying[] = {{4, 0xfffffff0u, NT_GNU_BUILD_ID},
                        {0xfffffffcu, 8, NT_GNU_BUILD_ID},
                        {4, 8, NT_GNU_BUILD_ID}};
  for (size_t i = 0; i < 3; i++) {
    memcpy(notes, &lying[i], sizeof lying[i]);
    memcpy(notes + sizeof lying[i], "GNU", 4);
    /* The last one's descriptor is cut off by the segment's end. */
    path = elf_with_notes(notes, sizeof lying[i] + 4 + (i == 2 ? 4 : 0), 4);
    cr_assert(jk_file_build_id(path, &got));
    cr_assert_eq(got.n, 0, "note %zu", i);
    unlink(path);
    free(path);
  }
}

Test(build_id, files_that_are_not_elf) {
  jk_build_id got;
  cr_assert_not(jk_file_build_id("/nonexistent/jitk/library.so", &got));
  char *path = scratch_file("#define VALUE 1\n", 16);
  cr_assert_not(jk_file_build_id(path, &got));
  unlink(path);
  free(path);
  /* An ELF magic number and nothing after it. */
  path = scratch_file(ELFMAG, SELFMAG);
  cr_assert_not(jk_file_build_id(path, &got));
  cr_assert_eq(got.n, 0);
  unlink(path);
  free(path);
}
