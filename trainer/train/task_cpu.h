/* task_cpu.h — CPU seconds of a group of this process's threads: those that appeared across a
 * call (/proc/self/task before and after). How trainfast tells its loader's threads (the decode
 * workers, started by fl_loader_create) from its compute threads when it reports how the cores
 * were split. Linux /proc; where it cannot be read the group is empty and its CPU time 0. */
#ifndef TF_TASK_CPU_H
#define TF_TASK_CPU_H

#define TF_MAX_TASKS 1024

typedef struct tf_tasks {
    int n;
    int tid[TF_MAX_TASKS];
} tf_tasks;

/* The threads of this process now (at most TF_MAX_TASKS). */
void tf_tasks_list(tf_tasks *t);

/* Keep in *now only the threads that are not in *before (the ones started in between). */
void tf_tasks_new(const tf_tasks *before, tf_tasks *now);

/* User + system CPU seconds of the threads of t that still run (clock-tick resolution). */
double tf_tasks_cpu(const tf_tasks *t);

#endif
