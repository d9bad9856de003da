/* repo_store.c -- one bare git repository per Hub repo, created with the
 * Hub's initial commit (.gitattributes on main). */
#include "storage/git/repo.h"

#include <errno.h>
#include <string.h>
#include <sys/stat.h>

const char repo_default_gitattributes[] =
	"*.7z filter=lfs diff=lfs merge=lfs -text\n"
	"*.arrow filter=lfs diff=lfs merge=lfs -text\n"
	"*.bin filter=lfs diff=lfs merge=lfs -text\n"
	"*.bz2 filter=lfs diff=lfs merge=lfs -text\n"
	"*.ckpt filter=lfs diff=lfs merge=lfs -text\n"
	"*.ftz filter=lfs diff=lfs merge=lfs -text\n"
	"*.gz filter=lfs diff=lfs merge=lfs -text\n"
	"*.h5 filter=lfs diff=lfs merge=lfs -text\n"
	"*.joblib filter=lfs diff=lfs merge=lfs -text\n"
	"*.lfs.* filter=lfs diff=lfs merge=lfs -text\n"
	"*.mlmodel filter=lfs diff=lfs merge=lfs -text\n"
	"*.model filter=lfs diff=lfs merge=lfs -text\n"
	"*.msgpack filter=lfs diff=lfs merge=lfs -text\n"
	"*.npy filter=lfs diff=lfs merge=lfs -text\n"
	"*.npz filter=lfs diff=lfs merge=lfs -text\n"
	"*.onnx filter=lfs diff=lfs merge=lfs -text\n"
	"*.ot filter=lfs diff=lfs merge=lfs -text\n"
	"*.parquet filter=lfs diff=lfs merge=lfs -text\n"
	"*.pb filter=lfs diff=lfs merge=lfs -text\n"
	"*.pickle filter=lfs diff=lfs merge=lfs -text\n"
	"*.pkl filter=lfs diff=lfs merge=lfs -text\n"
	"*.pt filter=lfs diff=lfs merge=lfs -text\n"
	"*.pth filter=lfs diff=lfs merge=lfs -text\n"
	"*.rar filter=lfs diff=lfs merge=lfs -text\n"
	"*.safetensors filter=lfs diff=lfs merge=lfs -text\n"
	"saved_model/**/* filter=lfs diff=lfs merge=lfs -text\n"
	"*.so filter=lfs diff=lfs merge=lfs -text\n"
	"*.tar.* filter=lfs diff=lfs merge=lfs -text\n"
	"*.tar filter=lfs diff=lfs merge=lfs -text\n"
	"*.tflite filter=lfs diff=lfs merge=lfs -text\n"
	"*.tgz filter=lfs diff=lfs merge=lfs -text\n"
	"*.wasm filter=lfs diff=lfs merge=lfs -text\n"
	"*.xz filter=lfs diff=lfs merge=lfs -text\n"
	"*.zip filter=lfs diff=lfs merge=lfs -text\n"
	"*.zst filter=lfs diff=lfs merge=lfs -text\n"
	"*tfevents* filter=lfs diff=lfs merge=lfs -text\n";

void repo_store_global_init(void)
{
	git_libgit2_init();
	/* Objects are verified when we write them; keep reads cheap. */
	git_libgit2_opts(GIT_OPT_ENABLE_STRICT_HASH_VERIFICATION, 0);
	git_libgit2_opts(GIT_OPT_SET_CACHE_MAX_SIZE, (ssize_t)64 * 1024 * 1024);
	/* A commit must survive a power cut once its ref moved. */
	git_libgit2_opts(GIT_OPT_ENABLE_FSYNC_GITDIR, 1);
}

char *repo_store_git_dir(const char *root, enum repo_type type, const char *ns, const char *name)
{
	return xasprintf("%s/%s/%s/%s.git", root, repo_type_plural(type), ns, name);
}

int repo_store_initial_commit(git_repository *repo)
{
	git_reference *main_ref = NULL;
	struct commit_builder *cb = NULL;
	char sha[41];
	int rc = KHUB_EIO;
	if (git_reference_lookup(&main_ref, repo, "refs/heads/main") == 0) {
		git_reference_free(main_ref);
		return 0;
	}
	cb = commit_builder_new(repo, NULL);
	if (!cb)
		goto cleanup;
	if ((rc = commit_builder_put_bytes(cb, ".gitattributes", repo_default_gitattributes,
					   strlen(repo_default_gitattributes), 0100644)) < 0)
		goto cleanup;
	if ((rc = commit_builder_write(cb, "system", "system@khub.local", "initial commit", NULL, sha)) < 0)
		goto cleanup;
	rc = repo_update_ref(repo, "refs/heads/main", NULL, sha, "initial commit");
	if (rc == KHUB_ECONFLICT)
		rc = 0;		/* another creator wrote it first */
cleanup:
	commit_builder_free(cb);
	return rc;
}

int repo_store_create(const char *root, enum repo_type type, const char *ns, const char *name)
{
	git_repository *repo = NULL;
	int rc = repo_store_init_empty(root, type, ns, name);
	if (rc < 0)
		return rc;
	if ((rc = repo_store_open(root, type, ns, name, &repo)) < 0)
		return rc;
	rc = repo_store_initial_commit(repo);
	git_repository_free(repo);
	return rc;
}

int repo_store_init_empty(const char *root, enum repo_type type, const char *ns, const char *name)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	git_repository *repo = NULL;
	struct stat st;
	int rc = KHUB_EIO;
	if (stat(dir, &st) == 0) {
		rc = KHUB_EEXIST;
		goto cleanup;
	}
	git_repository_init_options opts;
	git_repository_init_options_init(&opts, GIT_REPOSITORY_INIT_OPTIONS_VERSION);
	opts.flags = GIT_REPOSITORY_INIT_BARE | GIT_REPOSITORY_INIT_MKPATH | GIT_REPOSITORY_INIT_NO_REINIT;
	opts.initial_head = "main";
	if (git_repository_init_ext(&repo, dir, &opts) == 0)
		rc = 0;
	else if ((rc = khub_err_from_errno(errno)) != 0)	/* libgit2 leaves the failed call's errno */
		log_git_error("git init %s", dir);
cleanup:
	git_repository_free(repo);
	free(dir);
	return rc;
}

int repo_store_open(const char *root, enum repo_type type, const char *ns, const char *name,
		    git_repository **out)
{
	char *dir = repo_store_git_dir(root, type, ns, name);
	int rc = git_repository_open_bare(out, dir);
	free(dir);
	return rc < 0 ? KHUB_ENOTFOUND : 0;
}
