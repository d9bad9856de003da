/* storage.h -- khub's storage module, all of it: an umbrella over
 * storage/repo.h (names, repo store, reading, commit building, refs),
 * storage/lfs.h (pointers, LFS store), storage/db.h (the database) and
 * storage/variant_index.h, for code that uses every part; others include
 * only the headers they use. storage/publish.h is the write path. */
#ifndef KHUB_STORAGE_H
#define KHUB_STORAGE_H

#include "storage/repo.h"
#include "storage/lfs.h"
#include "storage/db.h"
#include "storage/variant_index.h"

#endif
