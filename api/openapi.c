/* openapi.c -- GET /api/openapi.json: khub's API description, the file
 * api/openapi.json compiled in by api/embed_files.sh. */
#include "api/api.h"

static enum MHD_Result handle_openapi(struct request *req)
{
	return respond_json_text(req, 200, embedded_openapi_json, embedded_openapi_json_len);
}

const struct route openapi_routes[] = {
	{ METHOD_GET | METHOD_HEAD, "/api/openapi.json", handle_openapi, 0, 0, NULL, ACCESS_PUBLIC },
	{ 0, NULL, NULL, 0, 0 },
};
