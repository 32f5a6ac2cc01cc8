/* A minimal static C Landlock runner, the reference the Rust runner is measured against
 * (bench/run builds it with `cc -static -O2`). It does what the harness's C
 * `landlock-run` does for read-only mode and no more: no_new_privs, one ruleset handling
 * the ABI 5 filesystem rights, read+execute beneath `/`, read+write on `/dev/null`,
 * each `--rw DIR` fully writable, then execve. It is a benchmark baseline, not a
 * sandbox anyone should use: it reads no request file and filters nothing else.
 *
 * usage: landlock-run [--rw DIR]... -- PROGRAM [ARGS...]
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <linux/landlock.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <unistd.h>

/* Debian 12's kernel headers stop at ABI 2; the later bits are fixed by the kernel ABI. */
#ifndef LANDLOCK_ACCESS_FS_TRUNCATE
#define LANDLOCK_ACCESS_FS_TRUNCATE (1ULL << 14)
#endif
#ifndef LANDLOCK_ACCESS_FS_IOCTL_DEV
#define LANDLOCK_ACCESS_FS_IOCTL_DEV (1ULL << 15)
#endif

#define R_X (LANDLOCK_ACCESS_FS_EXECUTE | LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_READ_DIR)
#define FILE_RW (LANDLOCK_ACCESS_FS_READ_FILE | LANDLOCK_ACCESS_FS_WRITE_FILE | \
                 LANDLOCK_ACCESS_FS_TRUNCATE | LANDLOCK_ACCESS_FS_IOCTL_DEV)
#define ALL ((LANDLOCK_ACCESS_FS_IOCTL_DEV << 1) - 1)

static int fail(const char *what) {
    fprintf(stderr, "landlock-run: %s: %s\n", what, strerror(errno));
    return 125;
}

static int add(int ruleset, const char *path, __u64 access) {
    int fd = open(path, O_PATH | O_CLOEXEC);
    if (fd < 0) return -1;
    struct landlock_path_beneath_attr attr = {.allowed_access = access, .parent_fd = fd};
    long r = syscall(SYS_landlock_add_rule, ruleset, LANDLOCK_RULE_PATH_BENEATH, &attr, 0);
    close(fd);
    return r < 0 ? -1 : 0;
}

int main(int argc, char **argv) {
    struct landlock_ruleset_attr ra = {.handled_access_fs = ALL};
    int ruleset = syscall(SYS_landlock_create_ruleset, &ra, sizeof ra, 0);
    if (ruleset < 0) return fail("landlock_create_ruleset");
    if (add(ruleset, "/", R_X) || add(ruleset, "/dev/null", FILE_RW)) return fail("add rule");
    int i = 1;
    for (; i + 1 < argc && strcmp(argv[i], "--rw") == 0; i += 2)
        if (add(ruleset, argv[i + 1], ALL)) return fail(argv[i + 1]);
    if (i >= argc || strcmp(argv[i], "--") != 0 || i + 1 >= argc) {
        fprintf(stderr, "usage: landlock-run [--rw DIR]... -- PROGRAM [ARGS...]\n");
        return 125;
    }
    if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0)) return fail("no_new_privs");
    if (syscall(SYS_landlock_restrict_self, ruleset, 0)) return fail("landlock_restrict_self");
    close(ruleset);
    execv(argv[i + 1], argv + i + 1);
    return fail(argv[i + 1]);
}
