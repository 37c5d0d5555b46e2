/*
 * The op executions of a TensorFlow profile as fixed-size rows in one bytes object: what
 * chakra._xplane.op_event_rows writes and chakra._op_rows reads (see chakra/tensorflow/profile.py). A
 * profile holds the executions of every profiled step and a conversion makes objects of one step's
 * only: the others are summed up from the rows.
 */
#ifndef CHAKRA_OP_ROWS_H
#define CHAKRA_OP_ROWS_H

#include <stdint.h>

/* One op execution. Times are past 64 bits only on damaged profiles; the keys are a stat's integer,
 * signed or not as it was written. */
typedef struct {
    __int128 start_ns, dur_ns;
    uint64_t group, instance;
    uint32_t step; /* its index in the profile's step ids */
    int32_t op;    /* its index in the profile's op names */
    int32_t line;  /* the thread: the line's index */
    uint8_t has_group, has_instance, group_unsigned, instance_unsigned;
} OpRow;

/* A key as the integer it is (unsigned or signed 64 bits). */
static inline __int128 key_value(uint64_t value, uint8_t is_unsigned) {
    return is_unsigned ? (__int128)value : (__int128)(int64_t)value;
}

#endif /* CHAKRA_OP_ROWS_H */
