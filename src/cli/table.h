/* table.h - the one text table helper: every aligned table a command
 * prints (correlate's VMCS table, check's list, ...) goes through it.
 *
 * Columns have a minimum width, an alignment and a gap before them; a
 * column grows to its widest cell, so a long cell never shifts the rest of
 * its row out of line.  The last column is never padded (no trailing
 * blanks).  Free lines ("notes") can follow any row.  May call: glib. */
#ifndef VT_TABLE_H
#define VT_TABLE_H

#include <glib.h>
#include <stdio.h>

G_BEGIN_DECLS

typedef struct VtTable VtTable;

VtTable *vt_table_new(void);
void vt_table_free(VtTable *t);
G_DEFINE_AUTOPTR_CLEANUP_FUNC(VtTable, vt_table_free)

/* A column: header, minimum width, right-aligned or not, blanks before it
 * (ignored for the first column). */
void vt_table_add_column(VtTable *t, const char *header, guint width, gboolean right, guint gap);
/* Start a row; then one vt_table_cell per column, in order. */
void vt_table_add_row(VtTable *t);
void vt_table_cell(VtTable *t, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* A line printed as it is after the current row (or before any row). */
void vt_table_note(VtTable *t, const char *fmt, ...) G_GNUC_PRINTF(2, 3);
/* Print the header line (if header) and every row with its notes. */
void vt_table_print(const VtTable *t, FILE *f, gboolean header);

G_END_DECLS

#endif
