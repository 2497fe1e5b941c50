/* consumer.c — a program outside the project that uses the installed libfastload: opens the
 * dataset named on the command line and prints its record count and library version. */
#include <fastload.h>
#include <stdio.h>

int main(int argc, char **argv)
{
    if (argc != 2)
        return 2;
    fl_dataset *ds;
    fl_error err;
    if (fl_dataset_open(argv[1], &ds, &err) != 0) {
        fprintf(stderr, "%s\n", err.msg);
        return 1;
    }
    printf("%s %llu\n", fl_version(), (unsigned long long)fl_dataset_count(ds));
    fl_dataset_close(ds);
    return 0;
}
