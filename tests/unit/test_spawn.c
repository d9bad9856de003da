/* test_spawn.c -- spawn_process gives its child descriptors 0-2 and the
 * ones asked for (as 3, 4, ...) and nothing else, close-on-exec or not;
 * fds_set_cloexec_from marks what is left open. */
#include "common/common.h"
#include "tap.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

/* Run sh -c script with keep as its kept descriptors; its stdout. */
static char *run_sh(const char *script, const int *keep, size_t nkeep)
{
	int out[2];
	if (pipe2(out, O_CLOEXEC) < 0)
		abort();
	char *argv[] = { "/bin/sh", "-c", (char *)script, NULL };
	struct spawn_opts o = { .argv = argv, .fd_in = -1, .fd_out = out[1], .fd_err = -1,
				.keep_fds = keep, .nkeep_fds = nkeep };
	pid_t pid;
	if (spawn_process(&o, &pid) < 0)
		abort();
	close(out[1]);
	struct strbuf sb = STRBUF_INIT;
	char buf[512];
	ssize_t n;
	while ((n = read(out[0], buf, sizeof(buf))) > 0)
		strbuf_add(&sb, buf, (size_t)n);
	close(out[0]);
	int status;
	waitpid(pid, &status, 0);
	return strbuf_detach(&sb, NULL);
}

/* The shell lists which of its descriptors 3..64 are open: a stat of
 * /proc/$$/fd/N opens nothing itself. */
#define LIST_OPEN "for n in $(seq 3 64); do [ -e /proc/$$/fd/$n ] && printf '%s ' $n; done; "

int main(void)
{
	/* what a threaded worker holds: a socket-like pipe and a file, without the flag */
	int leaked_pipe[2], leaked_file = open("/dev/null", O_RDONLY);
	if (pipe(leaked_pipe) < 0 || leaked_file < 0)
		abort();
	char *seen = run_sh(LIST_OPEN, NULL, 0);
	is_str(seen, "", "a child gets no descriptor past 2, close-on-exec or not");
	free(seen);

	int kept = memfd_create("kept", MFD_CLOEXEC);
	if (kept < 0 || write(kept, "bwrap reads this", 16) != 16 || lseek(kept, 0, SEEK_SET) < 0)
		abort();
	int second = memfd_create("second", MFD_CLOEXEC);
	if (second < 0 || write(second, "and this", 8) != 8 || lseek(second, 0, SEEK_SET) < 0)
		abort();
	int keep[] = { second, kept };	/* in an order unlike their numbers */
	seen = run_sh(LIST_OPEN "echo; cat <&3; echo; cat <&4", keep, 2);
	is_str(seen, "3 4 \nand this\nbwrap reads this", "the descriptors asked for become 3 and 4, in order, and only they");
	free(seen);

	ok(fcntl(leaked_file, F_GETFD) == 0, "the file was open across exec");
	fds_set_cloexec_from(3);
	ok(fcntl(leaked_file, F_GETFD) == FD_CLOEXEC && fcntl(leaked_pipe[0], F_GETFD) == FD_CLOEXEC &&
	   fcntl(leaked_pipe[1], F_GETFD) == FD_CLOEXEC, "fds_set_cloexec_from marks every descriptor close-on-exec");
	ok(fcntl(0, F_GETFD) == 0 || fcntl(0, F_GETFD) < 0, "… but not stdin");
	close(leaked_pipe[0]);
	close(leaked_pipe[1]);
	close(leaked_file);
	close(kept);
	close(second);
	return done_testing();
}
