/*
 * GNU build IDs of shared libraries, as loaded in this process and as
 * written in files.
 *
 * The cache labels what it stores with a digest of the compiler's library
 * files, read from disk. A package update can replace such a file under a
 * running process, which goes on compiling with the library it mapped
 * before: its output would then be stored under the new file's digest and
 * served to every process that loads the new library. The linker writes a
 * digest of each library's contents into the library itself (the
 * NT_GNU_BUILD_ID note), and that note is mapped with the code, so
 * comparing the note in memory with the note in the file tells whether the
 * file still is what runs. Device and inode numbers cannot tell it: on
 * overlay filesystems (containers) /proc/self/maps shows the underlying
 * file's, not the ones stat returns.
 */
#ifndef _GNU_SOURCE
#define _GNU_SOURCE /* dl_iterate_phdr */
#endif
#include <elf.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <unistd.h>

#include "base/base.h"

/* Finds the GNU build ID among the notes of one PT_NOTE segment. Notes are
 * aligned to 4 bytes, or to 8 where the segment says so. */
static bool note_build_id(const unsigned char *p, size_t len, size_t align, jk_build_id *out) {
  if (align != 8) align = 4;
  size_t at = 0;
  while (len - at >= sizeof(Elf64_Nhdr)) {
    Elf64_Nhdr h;
    memcpy(&h, p + at, sizeof h);
    size_t name_at = at + sizeof h;
    size_t name_len = ((size_t)h.n_namesz + align - 1) / align * align;
    size_t desc_len = ((size_t)h.n_descsz + align - 1) / align * align;
    if (name_len > len - name_at || desc_len > len - name_at - name_len) return false;
    if (h.n_type == NT_GNU_BUILD_ID && h.n_namesz == 4 && memcmp(p + name_at, "GNU", 4) == 0 &&
        h.n_descsz > 0 && h.n_descsz <= sizeof out->bytes) {
      out->n = h.n_descsz;
      memcpy(out->bytes, p + name_at + name_len, h.n_descsz);
      return true;
    }
    at = name_at + name_len + desc_len;
  }
  return false;
}

typedef struct find_loaded {
  const void *addr; /* the object holding this address, or */
  const char *name; /* the object whose file name ends in /name */
  jk_build_id *out;
  bool found;
} find_loaded;

static bool name_matches(const char *path, const char *name) {
  size_t pl = strlen(path), nl = strlen(name);
  return pl >= nl && strcmp(path + pl - nl, name) == 0 && (pl == nl || path[pl - nl - 1] == '/');
}

static int visit(struct dl_phdr_info *info, size_t size, void *arg) {
  (void)size;
  find_loaded *f = arg;
  bool ours = false;
  if (f->addr != NULL) {
    uintptr_t a = (uintptr_t)f->addr;
    for (int i = 0; i < info->dlpi_phnum && !ours; i++) {
      const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
      uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
      ours = ph->p_type == PT_LOAD && a >= lo && a - lo < ph->p_memsz;
    }
  } else {
    ours = info->dlpi_name != NULL && name_matches(info->dlpi_name, f->name);
  }
  if (!ours) return 0;
  f->found = true;
  for (int i = 0; i < info->dlpi_phnum; i++) {
    const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
    if (ph->p_type != PT_NOTE) continue;
    if (note_build_id((const unsigned char *)(info->dlpi_addr + ph->p_vaddr), ph->p_memsz,
                      ph->p_align, f->out))
      break;
  }
  return 1;
}

bool jk_loaded_build_id(const void *addr, const char *name, jk_build_id *out) {
  memset(out, 0, sizeof *out);
  find_loaded f = {addr, name, out, false};
  if (addr == NULL && name == NULL) return false;
  dl_iterate_phdr(visit, &f);
  return f.found;
}

static bool read_at(int fd, void *buf, size_t n, uint64_t at) {
  unsigned char *p = buf;
  while (n > 0) {
    ssize_t r = pread(fd, p, n, (off_t)at);
    if (r <= 0) return false;
    p += r;
    n -= (size_t)r;
    at += (uint64_t)r;
  }
  return true;
}

bool jk_file_build_id(const char *path, jk_build_id *out) {
  memset(out, 0, sizeof *out);
  int fd = open(path, O_RDONLY | O_CLOEXEC);
  if (fd < 0) return false;
  Elf64_Ehdr eh;
  bool ok = read_at(fd, &eh, sizeof eh, 0) && memcmp(eh.e_ident, ELFMAG, SELFMAG) == 0 &&
            eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr);
  /* Notes of a library are a few hundred bytes; more is not a build ID. */
  unsigned char notes[4096];
  for (unsigned i = 0; ok && i < eh.e_phnum; i++) {
    Elf64_Phdr ph;
    if (!read_at(fd, &ph, sizeof ph, eh.e_phoff + (uint64_t)i * sizeof ph)) break;
    if (ph.p_type != PT_NOTE || ph.p_filesz > sizeof notes) continue;
    if (read_at(fd, notes, ph.p_filesz, ph.p_offset) &&
        note_build_id(notes, ph.p_filesz, ph.p_align, out))
      break;
  }
  close(fd);
  return ok;
}

bool jk_build_id_same(const jk_build_id *a, const jk_build_id *b) {
  return a->n == b->n && memcmp(a->bytes, b->bytes, a->n) == 0;
}
