/* build_output.c -- the check of a build's output tar before anything of
 * it is published (farm/build_publish.c): layout, paths, member kinds and
 * sizes, metadata.json and its version, the ABI report. The upload itself
 * is api/builds_output.c's. */
#include "farm/farm.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <inttypes.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define OUTPUT_MAX_ENTRIES 20000	/* members, directories and "./" included */
#define REPORT_MAX_BYTES (16 * 1024 * 1024)
#define README_MAX_BYTES (1024 * 1024)

void build_output_release(struct build_output *out)
{
	if (!out)
		return;
	json_decref(out->report);
	free(out->metadata);
	free(out->report_text);
	free(out->readme);
	memset(out, 0, sizeof(*out));
}

int build_output_open(const char *path, struct archive **out)
{
	struct archive *ar = archive_read_new();
	archive_read_support_format_tar(ar);
	archive_read_support_format_gnutar(ar);
	archive_read_support_filter_none(ar);
	if (archive_read_open_filename(ar, path, 65536) != ARCHIVE_OK) {
		archive_read_free(ar);
		return KHUB_EINVAL;
	}
	*out = ar;
	return 0;
}

/* A tar member's name without a leading "./" and trailing "/"; NULL when
 * absolute, empty, or holding "." or ".." components or NUL tricks. */
char *build_output_clean_path(const char *raw)
{
	if (!raw || raw[0] == '/')
		return NULL;
	while (raw[0] == '.' && raw[1] == '/')
		raw += 2;
	char *p = xstrdup(raw);
	size_t len = strlen(p);
	while (len > 0 && p[len - 1] == '/')
		p[--len] = '\0';
	const char *why;
	if (!len || strstr(p, "//") || repo_path_validate(p, &why) < 0) {
		free(p);
		return NULL;
	}
	for (char *seg = p; seg; seg = strchr(seg, '/') ? strchr(seg, '/') + 1 : NULL) {
		size_t n = strcspn(seg, "/");
		if ((n == 1 && seg[0] == '.') || (n == 2 && seg[0] == '.' && seg[1] == '.')) {
			free(p);
			return NULL;
		}
	}
	return p;
}

/* Read a member's bytes whole (at most limit): the caller frees. The
 * buffer grows with the bytes read, never to the size a header claims. */
char *build_output_read_member(struct archive *ar, int64_t size, size_t limit, size_t *len)
{
	if (size < 0 || (uint64_t)size > limit)
		return NULL;
	struct strbuf buf = STRBUF_INIT;
	char chunk[16384];
	la_ssize_t n;
	while ((n = archive_read_data(ar, chunk, sizeof(chunk))) > 0) {
		if (buf.len + (size_t)n > (size_t)size) {
			strbuf_release(&buf);
			return NULL;
		}
		strbuf_add(&buf, chunk, (size_t)n);
	}
	if (n < 0 || buf.len != (size_t)size) {
		strbuf_release(&buf);
		return NULL;
	}
	return strbuf_detach(&buf, len);
}

/* Read a member through a small buffer: its real bytes (holes of a sparse
 * member are not counted: those are refused before), or -1 when the tar
 * ends early or is damaged. */
static int64_t member_real_bytes(struct archive *ar)
{
	char chunk[65536];
	int64_t total = 0;
	la_ssize_t n;
	while ((n = archive_read_data(ar, chunk, sizeof(chunk))) > 0)
		total += n;
	return n < 0 ? -1 : total;
}

#define REFUSE(...) do { snprintf(why, why_size, __VA_ARGS__); rc = KHUB_EINVAL; goto cleanup; } while (0)

long build_toml_version(const char *text)
{
	int in_general = 0;
	for (const char *line = text; line && *line; line = strchr(line, '\n') ? strchr(line, '\n') + 1 : NULL) {
		while (*line == ' ' || *line == '\t')
			line++;
		if (*line == '[')
			in_general = strncmp(line, "[general]", 9) == 0;
		else if (in_general && strncmp(line, "version", 7) == 0) {
			const char *v = line + 7 + strspn(line + 7, " \t");
			if (*v == '=')
				return strtol(v + 1 + strspn(v + 1, " \t"), NULL, 10);
		}
	}
	return -1;
}

/* One regular member outside the three files read whole: its declared
 * size must be the bytes that really follow it. 0 or KHUB_EINVAL. */
static int check_plain_member(struct archive *ar, const char *name, int64_t size, uint64_t *total, char *why,
			      size_t why_size)
{
	int64_t real = member_real_bytes(ar);
	if (real < 0 || real != size) {
		snprintf(why, why_size, "'%.200s' claims %" PRId64 " bytes but the tar holds %" PRId64, name, size,
			 real < 0 ? (int64_t)0 : real);
		return KHUB_EINVAL;
	}
	*total += (uint64_t)real;
	return 0;
}

/* Refuse what is not a plain member: links, devices, sparse files, sizes
 * past the limits. 0 or KHUB_EINVAL. */
static int check_member_kind(struct archive_entry *e, const char *name, uint64_t total, uint64_t tar_size,
			     char *why, size_t why_size)
{
	mode_t type = archive_entry_filetype(e);
	int64_t size = archive_entry_size(e);
	if (type != AE_IFREG || archive_entry_hardlink(e) || archive_entry_symlink(e))
		snprintf(why, why_size, "'%.200s' is not a regular file (links and devices are refused)", name);
	else if (archive_entry_sparse_count(e) > 0)
		snprintf(why, why_size, "'%.200s' is a sparse file (refused: write its bytes)", name);
	else if (size < 0 || (uint64_t)size > (uint64_t)farm_settings.output_max_bytes ||
		 (uint64_t)size > tar_size || total + (uint64_t)size > tar_size)
		snprintf(why, why_size, "'%.200s' is too large (%" PRId64 " bytes; the tar is %" PRIu64 ")", name,
			 size, tar_size);
	else
		return 0;
	return KHUB_EINVAL;
}

/* A regular member: metadata.json, abi-report.json and README.md read
 * whole (bounded), any other file of <variant>/ read through and counted. */
static int check_file(struct archive *ar, struct archive_entry *e, const char *name, const char *variant,
		      struct build_output *out, uint64_t *total, char *why, size_t why_size)
{
	size_t vlen = strlen(variant), len = 0;
	int64_t size = archive_entry_size(e);
	int in_variant = strncmp(name, variant, vlen) == 0 && name[vlen] == '/';
	if (in_variant)
		out->files++;
	if (in_variant && strcmp(name + vlen, "/metadata.json") == 0 && !out->metadata) {
		if (!(out->metadata = build_output_read_member(ar, size, METADATA_MAX_BYTES, &out->metadata_len)))
			return snprintf(why, why_size, "%s/metadata.json is unreadable or larger than %d bytes", variant,
					METADATA_MAX_BYTES), KHUB_EINVAL;
	} else if (strcmp(name, "abi-report.json") == 0 && !out->report_text) {
		if (!(out->report_text = build_output_read_member(ar, size, REPORT_MAX_BYTES, &len)))
			return snprintf(why, why_size, "abi-report.json is unreadable or too large"), KHUB_EINVAL;
	} else if (strcmp(name, "README.md") == 0 && !out->readme) {
		if (!(out->readme = build_output_read_member(ar, size, README_MAX_BYTES, &out->readme_len)))
			return snprintf(why, why_size, "README.md is unreadable or larger than %d bytes", README_MAX_BYTES),
			       KHUB_EINVAL;
	} else if (in_variant) {
		return check_plain_member(ar, name, size, total, why, why_size);
	} else {
		return snprintf(why, why_size, "'%.200s' is outside %s/ or repeated (the output holds %s/, "
				"abi-report.json and README.md once each)", name, variant, variant), KHUB_EINVAL;
	}
	*total += (uint64_t)size;
	return 0;
}

int build_output_check(const char *path, const char *variant, const char *build_toml, struct build_output *out,
		       char *why, size_t why_size)
{
	struct archive *ar = NULL;
	struct archive_entry *e;
	char *name = NULL;
	int rc = 0, r;
	size_t vlen = strlen(variant), headers = 0;
	uint64_t total = 0, tar_size = 0;
	struct stat st;
	memset(out, 0, sizeof(*out));
	if (stat(path, &st) < 0 || build_output_open(path, &ar) < 0)
		REFUSE("the output is not a tar archive");
	tar_size = (uint64_t)st.st_size;
	while ((r = archive_read_next_header(ar, &e)) == ARCHIVE_OK) {
		const char *raw = archive_entry_pathname(e);
		if (++headers > OUTPUT_MAX_ENTRIES)
			REFUSE("more than %d entries in the output", OUTPUT_MAX_ENTRIES);
		if (archive_entry_filetype(e) == AE_IFDIR && raw && (strcmp(raw, ".") == 0 || strcmp(raw, "./") == 0))
			continue;	/* the top of `tar -C dir .` */
		free(name);
		name = build_output_clean_path(raw);
		if (!name)
			REFUSE("bad path in the output: '%.200s' (absolute, empty, '.', '..' or not a repo path)",
			       archive_entry_pathname(e) ? archive_entry_pathname(e) : "");
		out->entries++;
		int in_variant = strncmp(name, variant, vlen) == 0 && (name[vlen] == '/' || name[vlen] == '\0');
		if (archive_entry_filetype(e) == AE_IFDIR && !archive_entry_hardlink(e) && !archive_entry_symlink(e)) {
			if (!in_variant)
				REFUSE("'%.200s' is not the variant's directory (%s/)", name, variant);
			continue;
		}
		if ((rc = check_member_kind(e, name, total, tar_size, why, why_size)) < 0 ||
		    (rc = check_file(ar, e, name, variant, out, &total, why, why_size)) < 0)
			goto cleanup;
	}
	if (r != ARCHIVE_EOF)
		REFUSE("the output tar is damaged: %.200s", archive_error_string(ar) ? archive_error_string(ar) : "");
	if (!out->files)
		REFUSE("the output has no files under %s/", variant);
	if (!out->metadata)
		REFUSE("%s/metadata.json is missing", variant);
	struct variant_check c;
	variant_check_init(&c, variant);
	variant_check_metadata(&c, out->metadata, out->metadata_len);
	if (!c.name_valid || c.metadata_status != VARIANT_METADATA_OK || !c.has_kernel_version || c.kernel_version < 1) {
		snprintf(why, why_size, "%s/metadata.json: %s", variant,
			 !c.name_valid ? c.name_error : c.metadata_error[0] ? c.metadata_error : "no integer version >= 1");
		variant_check_release(&c);
		rc = KHUB_EINVAL;
		goto cleanup;
	}
	out->version = (long)c.kernel_version;
	variant_check_release(&c);
	long source_version = build_toml ? build_toml_version(build_toml) : -1;
	if (source_version >= 0 && source_version != out->version)
		REFUSE("%s/metadata.json has version %ld but the source's build.toml says %ld", variant, out->version,
		       source_version);
	if (out->report_text) {
		out->report = json_loads(out->report_text, 0, NULL);
		if (!json_is_object(out->report) || !json_is_boolean(json_object_get(out->report, "ok")))
			REFUSE("abi-report.json is not an object with a boolean \"ok\"");
	}
cleanup:
	free(name);
	if (ar)
		archive_read_free(ar);
	return rc;
}
