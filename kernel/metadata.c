/* metadata.c -- one build/<variant>/ judged: its name as the loader parses
 * it, and its metadata.json against the kernel requirements (id, name,
 * version, license and backend required; softer problems are warnings). */
#include "kernel/kernel.h"

#include <stdarg.h>
#include <stdlib.h>
#include <string.h>

const char *variant_metadata_status_name(enum variant_metadata_status s)
{
	return s == VARIANT_METADATA_OK ? "ok" : s == VARIANT_METADATA_MISSING ? "missing" : "invalid";
}

static void add_warning(struct variant_check *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void add_warning(struct variant_check *c, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	strvec_vpushf(&c->warnings, fmt, ap);
	va_end(ap);
}

static void set_invalid(struct variant_check *c, const char *error)
{
	c->metadata_status = VARIANT_METADATA_INVALID;
	snprintf(c->metadata_error, sizeof(c->metadata_error), "%s", error);
}

void variant_check_init(struct variant_check *c, const char *name)
{
	memset(c, 0, sizeof(*c));
	c->name_valid = variant_name_parse(name, &c->parsed, &c->name_error) == 0;
	if (c->name_valid) {
		c->name_error = NULL;
		char canonical[2 * VARIANT_NAME_MAX];
		variant_name_format(&c->parsed, canonical, sizeof(canonical));
		if (strcmp(canonical, name) != 0)
			add_warning(c, "non-canonical name: the loader looks for build/%s/ instead", canonical);
	}
	c->metadata_status = VARIANT_METADATA_MISSING;
	snprintf(c->metadata_error, sizeof(c->metadata_error), "build/<variant>/metadata.json is missing");
}

void variant_check_unreadable(struct variant_check *c, const char *why)
{
	set_invalid(c, why);
}

static int is_python_identifier(const char *s)
{
	if (!s[0] || (s[0] >= '0' && s[0] <= '9'))
		return 0;
	for (const char *p = s; *p; p++)
		if (!((*p >= 'a' && *p <= 'z') || (*p >= 'A' && *p <= 'Z') || (*p >= '0' && *p <= '9') || *p == '_'))
			return 0;
	return 1;
}

/* kernels-data's KernelName: ^[a-z][-a-z0-9]*[a-z0-9]$ */
static int is_kernel_name(const char *s)
{
	size_t n = strlen(s);
	if (n < 2 || s[0] < 'a' || s[0] > 'z')
		return 0;
	for (size_t i = 1; i < n; i++)
		if (!((s[i] >= 'a' && s[i] <= 'z') || (s[i] >= '0' && s[i] <= '9') || (s[i] == '-' && i < n - 1)))
			return 0;
	return 1;
}

static int is_string_list(json_t *v)
{
	size_t i;
	json_t *item;
	if (!json_is_array(v))
		return 0;
	json_array_foreach(v, i, item)
		if (!json_is_string(item))
			return 0;
	return 1;
}

/* The document's fields, then the first broken requirement. */
static void check_document(struct variant_check *c, json_t *doc)
{
	const char *error = NULL;
	json_t *id = json_object_get(doc, "id"), *name = json_object_get(doc, "name");
	json_t *version = json_object_get(doc, "version"), *license = json_object_get(doc, "license");
	json_t *backend = json_object_get(doc, "backend"), *depends = json_object_get(doc, "python-depends");
	json_t *type = json_object_get(backend, "type"), *archs = json_object_get(backend, "archs");

	c->kernel_id = json_string_value(id);
	c->kernel_name = json_string_value(name);
	c->has_kernel_version = json_is_integer(version);
	c->kernel_version = json_integer_value(version);
	c->license = json_string_value(license);
	c->backend_type = json_string_value(type);
	c->backend_archs = archs;
	c->python_depends = depends;

	if (!json_is_string(id))
		error = "\"id\" (string) is required";
	else if (!is_python_identifier(json_string_value(id)))
		error = "\"id\" must be a valid Python module name";
	else if (!json_is_string(name))
		error = "\"name\" (string) is required";
	else if (!is_kernel_name(json_string_value(name)))
		error = "\"name\" must match ^[a-z][-a-z0-9]*[a-z0-9]$";
	else if (!json_is_integer(version) || json_integer_value(version) < 0)
		error = "\"version\" (non-negative integer) is required";
	else if (!json_is_string(license))
		error = "\"license\" (string) is required";
	else if (!json_is_object(backend))
		error = "\"backend\" (object with \"type\") is required";
	else if (!json_is_string(type))
		error = "\"backend.type\" (string) is required";
	else if (archs && !json_is_null(archs) && !is_string_list(archs))
		error = "\"backend.archs\" must be a list of strings";
	else if (depends && !is_string_list(depends))
		error = "\"python-depends\" must be a list of strings";
	else if (!kernel_backend_find(json_string_value(type)))
		error = "\"backend.type\" must be one of cann, cpu, cuda, metal, neuron, rocm, tpu, xpu";
	if (error) {
		set_invalid(c, error);
		return;
	}
	c->metadata_status = VARIANT_METADATA_OK;
	c->metadata_error[0] = '\0';
	const char *t = json_string_value(type);
	if (kernel_backend_find(t)->archs_expected && !is_string_list(archs))
		add_warning(c, "backend.archs is not given: the kernel requirements want the supported %s "
			    "architectures listed", t);
	if (!depends)
		add_warning(c, "no \"python-depends\": kernels-data's metadata parser requires the key (use [] for none)");
	const char *implied = c->name_valid ? variant_implied_backend_type(&c->parsed) : NULL;
	if (implied && strcmp(implied, t) != 0)
		add_warning(c, "backend.type is %s but the variant name says %s", t, implied);
}

void variant_check_metadata(struct variant_check *c, const char *text, size_t len)
{
	json_error_t err;
	if (len > METADATA_MAX_BYTES) {
		set_invalid(c, "metadata.json is larger than 256 KiB");
		return;
	}
	json_t *doc = json_loadb(text, len, JSON_REJECT_DUPLICATES, &err);
	if (!doc) {
		c->metadata_status = VARIANT_METADATA_INVALID;
		snprintf(c->metadata_error, sizeof(c->metadata_error), "metadata.json is not valid JSON: %s (line %d)",
			 err.text, err.line);
		return;
	}
	json_decref(c->metadata);
	c->metadata = doc;
	if (!json_is_object(doc)) {
		set_invalid(c, "metadata.json is not a JSON object");
		return;
	}
	check_document(c, doc);
}

void variant_check_release(struct variant_check *c)
{
	if (!c)
		return;
	strvec_release(&c->warnings);
	json_decref(c->metadata);
	memset(c, 0, sizeof(*c));
}
