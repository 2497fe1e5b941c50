/* task_cpu.c — CPU seconds of a group of this process's threads (task_cpu.h), from
 * /proc/self/task/TID/stat (utime and stime, fields 14 and 15, in clock ticks). */
#include "task_cpu.h"

#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

void tf_tasks_list(tf_tasks *t)
{
    t->n = 0;
    DIR *d = opendir("/proc/self/task");
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) && t->n < TF_MAX_TASKS) {
        int tid = atoi(e->d_name);
        if (tid > 0)
            t->tid[t->n++] = tid;
    }
    closedir(d);
}

void tf_tasks_new(const tf_tasks *before, tf_tasks *now)
{
    int k = 0;
    for (int i = 0; i < now->n; i++) {
        int seen = 0;
        for (int j = 0; j < before->n && !seen; j++)
            seen = before->tid[j] == now->tid[i];
        if (!seen)
            now->tid[k++] = now->tid[i];
    }
    now->n = k;
}

/* utime + stime of one thread, in clock ticks; 0 when it is gone */
static unsigned long long task_ticks(int tid)
{
    char path[64], buf[1024];
    snprintf(path, sizeof path, "/proc/self/task/%d/stat", tid);
    FILE *f = fopen(path, "r");
    if (!f)
        return 0;
    size_t len = fread(buf, 1, sizeof buf - 1, f);
    fclose(f);
    buf[len] = 0;
    /* the name (field 2) is in parentheses and may hold spaces: count fields after its ')' */
    const char *p = strrchr(buf, ')');
    if (!p)
        return 0;
    unsigned long long ut = 0, st = 0;
    /* fields 3..13 skipped, then utime (14) and stime (15) */
    if (sscanf(p + 1, " %*c %*d %*d %*d %*d %*d %*u %*u %*u %*u %*u %llu %llu", &ut, &st) != 2)
        return 0;
    return ut + st;
}

double tf_tasks_cpu(const tf_tasks *t)
{
    long hz = sysconf(_SC_CLK_TCK);
    unsigned long long ticks = 0;
    for (int i = 0; i < t->n; i++)
        ticks += task_ticks(t->tid[i]);
    return hz > 0 ? (double)ticks / (double)hz : 0;
}
