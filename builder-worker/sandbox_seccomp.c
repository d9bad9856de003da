/* sandbox_seccomp.c -- the seccomp filter bubblewrap loads before build code
 * runs: the system calls a compiler or a Python import has no use for and
 * that an escape needs (mounts, namespaces, tracing other processes, kernel
 * keys, BPF, modules...) answer EPERM; everything else is allowed. Built
 * with libseccomp and handed to bwrap as BPF through a memfd. */
#include "builder-worker/build_internal.h"

#include <errno.h>
#include <sched.h>
#include <seccomp.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <unistd.h>

/* Refused outright. A name this libseccomp or architecture does not know
 * is skipped (an unknown system call cannot be called by name either). */
static const char *const refused_calls[] = {
	/* the filesystem tree */
	"mount", "umount", "umount2", "pivot_root", "chroot", "move_mount", "open_tree", "fsopen", "fsconfig",
	"fsmount", "fspick", "mount_setattr",
	/* namespaces: entering, making (clone is filtered by flags below) */
	"unshare", "setns",
	/* other processes' memory and files */
	"ptrace", "process_vm_readv", "process_vm_writev", "kcmp", "pidfd_getfd",
	/* kernel keys, BPF, perf, userfaultfd, io_uring */
	"keyctl", "add_key", "request_key", "bpf", "perf_event_open", "userfaultfd", "io_uring_setup",
	"io_uring_enter", "io_uring_register", "fanotify_init",
	/* the machine */
	"kexec_load", "kexec_file_load", "init_module", "finit_module", "delete_module", "reboot", "swapon",
	"swapoff", "acct", "quotactl", "quotactl_fd", "syslog", "vhangup", "iopl", "ioperm", "settimeofday",
	"clock_settime", "clock_adjtime", "adjtimex", "sethostname", "setdomainname", "nfsservctl",
	"lookup_dcookie", "uselib", "_sysctl", "sysfs", "ustat",
	/* files by handle (escapes a bind mount) */
	"open_by_handle_at", "name_to_handle_at",
};

/* clone with any of these makes a namespace. */
static const unsigned long namespace_flags[] = {
	CLONE_NEWNS, CLONE_NEWCGROUP, CLONE_NEWUTS, CLONE_NEWIPC, CLONE_NEWUSER, CLONE_NEWPID, CLONE_NEWNET,
#ifdef CLONE_NEWTIME
	CLONE_NEWTIME,
#endif
};

static int add_rules(scmp_filter_ctx ctx)
{
	for (size_t i = 0; i < sizeof(refused_calls) / sizeof(*refused_calls); i++) {
		int nr = seccomp_syscall_resolve_name(refused_calls[i]);
		if (nr == __NR_SCMP_ERROR)
			continue;
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), nr, 0) < 0)
			return -1;
	}
	for (size_t i = 0; i < sizeof(namespace_flags) / sizeof(*namespace_flags); i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(clone), 1,
				     SCMP_A0(SCMP_CMP_MASKED_EQ, namespace_flags[i], namespace_flags[i])) < 0)
			return -1;
	/* clone3 passes its flags in memory a filter cannot read: ENOSYS makes
	 * the C library fall back to clone, whose flags are checked above. */
	int clone3 = seccomp_syscall_resolve_name("clone3");
	if (clone3 != __NR_SCMP_ERROR && seccomp_rule_add(ctx, SCMP_ACT_ERRNO(ENOSYS), clone3, 0) < 0)
		return -1;
	/* typing into a terminal that is not the build's */
	unsigned long ttys[] = { TIOCSTI, TIOCLINUX };
	for (size_t i = 0; i < 2; i++)
		if (seccomp_rule_add(ctx, SCMP_ACT_ERRNO(EPERM), SCMP_SYS(ioctl), 1,
				     SCMP_A1(SCMP_CMP_MASKED_EQ, 0xffffffffUL, ttys[i])) < 0)
			return -1;
	return 0;
}

int sandbox_seccomp_fd(void)
{
	/* Only the native architecture's calls pass; another one (i386 system
	 * calls from x86_64 code) kills the process, libseccomp's default. */
	scmp_filter_ctx ctx = seccomp_init(SCMP_ACT_ALLOW);
	int fd = -1;
	if (!ctx)
		return -1;
	if (add_rules(ctx) < 0)
		goto fail;
	fd = memfd_create("khub-seccomp", MFD_CLOEXEC);	/* spawn_process hands it to bwrap */
	if (fd < 0 || seccomp_export_bpf(ctx, fd) < 0 || lseek(fd, 0, SEEK_SET) < 0)
		goto fail;
	seccomp_release(ctx);
	return fd;
fail:
	if (fd >= 0)
		close(fd);
	seccomp_release(ctx);
	return -1;
}
