/* exec_file.h - the internals of executable files (exec_file.c; the format is described at the
 * top of that file and in docs/vm.md, "Executable files"), for the tests, the loader's fuzz
 * target and tools: the structural decoder alone (without vm_exec_validate / vm_exec_bind), the
 * encoder into memory, field-by-field equality of two executables, and the release of what the
 * decoder allocated. vm.h's vm_exec_save / vm_exec_load / vm_exec_load_bytes are built on these. */
#ifndef RLY_RUNTIME_EXEC_FILE_H
#define RLY_RUNTIME_EXEC_FILE_H

#include <stdbool.h>
#include <stddef.h>

#include "runtime/vm.h"
#include "support/support.h"

#define RT_EXEC_VERSION 2u /* the version this build writes (it reads 1 and 2) */

/* Flags of rt_exec_decode / rt_exec_load_file. */
enum {
    RT_EXEC_CHECK = 1u, /* also vm_exec_validate and vm_exec_bind the result (what vm.h does) */
};

/* Decode the image data[0 .. len) into a new executable. Constants' bytes are used in place
 * when data's constant section is 64-byte aligned in memory, and copied (into exe->arena)
 * otherwise; strings are used in place. `data` must outlive the result. NULL with a message
 * "rlyx: ..." in err when the image is malformed (or, with RT_EXEC_CHECK, invalid). Free the
 * result with vm_exec_free (or rt_exec_release). */
VmExec *rt_exec_decode(const void *data, size_t len, unsigned flags, char *err, size_t cap);
/* The same over a file, mapped read-only (exe->mapping, exe->mapping_len); messages begin with
 * the path. */
VmExec *rt_exec_load_file(const char *path, unsigned flags, char *err, size_t cap);

/* Append the image of exe to out (what vm_exec_save writes). false with a message when exe
 * cannot be saved (a user operator, a constant that is not a tensor, a missing name, a string
 * table past 4 GiB); out may then hold part of an image. The encoding is deterministic:
 * encode(decode(encode(e))) == encode(e) byte for byte. */
bool rt_exec_encode(const VmExec *exe, StrBuf *out, char *err, size_t cap);

/* Everything the file holds is equal in a and b (VmNode.fn, the arena and the mapping are not
 * compared; floats compare by their bits). false with the first difference in why. */
bool rt_exec_equal(const VmExec *a, const VmExec *b, char *why, size_t cap);

/* Free an executable made by rt_exec_decode / rt_exec_load_file: each constant's immortal tensor
 * header (rt_value_free_immortal; the bytes live in the mapping or the arena), the arena, the
 * mapping (munmap), and exe itself (malloc'ed). What vm_exec_free must do for such an executable;
 * NULL is a no-op. */
void rt_exec_release(VmExec *exe);

#endif /* RLY_RUNTIME_EXEC_FILE_H */
