/*
 * comm_rules.c — the user's classification rules (comm_rules.h): compiled
 * POSIX extended regular expressions, searched in an op's whole name, with
 * --compute-kernel rules taking precedence over --comm-kernel ones.
 */
#include "comm_rules.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ssa_model.h"

int ssa_comm_rules_add(ssa_comm_rules *rules, const char *pattern, int comm, const char *origin,
                       char *why, size_t whylen) {
  if (!*pattern) {
    snprintf(why, whylen, "empty pattern (it would match every op)");
    return -1;
  }
  if (ssa_grow((void **)&rules->rule, &rules->cap, rules->n + 1, sizeof *rules->rule)) {
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  ssa_comm_rule *r = &rules->rule[rules->n];
  memset(r, 0, sizeof *r);
  int rc = regcomp(&r->re, pattern, REG_EXTENDED | REG_NOSUB);
  if (rc != 0) {
    regerror(rc, &r->re, why, whylen);
    regfree(&r->re);
    return -1;
  }
  r->pattern = strdup(pattern);
  if (!r->pattern) {
    regfree(&r->re);
    snprintf(why, whylen, "out of memory");
    return -1;
  }
  r->comm = comm;
  r->origin = origin;
  rules->n++;
  return 0;
}

int ssa_comm_rules_add_list(ssa_comm_rules *rules, const char *list, int comm, const char *origin,
                            char **bad, char *why, size_t whylen) {
  *bad = NULL;
  for (const char *p = list; *p;) {
    const char *semi = strchr(p, ';');
    size_t len = semi ? (size_t)(semi - p) : strlen(p);
    if (len > 0) {
      char *one = malloc(len + 1);
      if (!one) {
        snprintf(why, whylen, "out of memory");
        return -1;
      }
      memcpy(one, p, len);
      one[len] = 0;
      if (ssa_comm_rules_add(rules, one, comm, origin, why, whylen)) {
        *bad = one;
        return -1;
      }
      free(one);
    }
    p += len;
    if (*p == ';') p++;
  }
  return 0;
}

void ssa_comm_rules_free(ssa_comm_rules *rules) {
  for (size_t i = 0; i < rules->n; i++) {
    regfree(&rules->rule[i].re);
    free(rules->rule[i].pattern);
  }
  free(rules->rule);
  memset(rules, 0, sizeof *rules);
}

int ssa_comm_rules_match(const ssa_comm_rules *rules, const char *name) {
  if (!rules) return -1;
  int comm = -1;
  for (size_t i = 0; i < rules->n; i++) {
    const ssa_comm_rule *r = &rules->rule[i];
    if (r->comm && comm >= 0) continue; /* a comm rule already matched; only compute can win */
    if (regexec(&r->re, name, 0, NULL, 0) != 0) continue;
    if (!r->comm) return (int)i;
    comm = (int)i;
  }
  return comm;
}

const char *ssa_comm_rule_option(const ssa_comm_rule *rule) {
  return rule->comm ? "--comm-kernel" : "--compute-kernel";
}

void ssa_class_count_add(ssa_class_count *c, int64_t start, int64_t end) {
  c->ops++;
  if (end > start) c->time_ns += end - start;
}
