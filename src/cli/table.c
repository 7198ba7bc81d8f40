/* table.c - aligned text tables (see table.h). */
#include "config.h"

#include <stdarg.h>
#include <string.h>

#include "src/cli/table.h"

typedef struct {
	char *header;
	guint width;
	gboolean right;
	guint gap;
} Column;

typedef struct {
	GPtrArray *cells;  /* char * */
	GPtrArray *notes;  /* char *, printed after the row */
} Row;

struct VtTable {
	GArray *cols;      /* Column */
	GArray *rows;      /* Row */
	GPtrArray *lead;   /* notes before the first row */
};

static void column_clear(gpointer p)
{
	g_free(((Column *)p)->header);
}

static void row_clear(gpointer p)
{
	Row *r = p;

	g_ptr_array_unref(r->cells);
	g_ptr_array_unref(r->notes);
}

VtTable *vt_table_new(void)
{
	VtTable *t = g_new0(VtTable, 1);

	t->cols = g_array_new(FALSE, FALSE, sizeof(Column));
	g_array_set_clear_func(t->cols, column_clear);
	t->rows = g_array_new(FALSE, FALSE, sizeof(Row));
	g_array_set_clear_func(t->rows, row_clear);
	t->lead = g_ptr_array_new_with_free_func(g_free);
	return t;
}

void vt_table_free(VtTable *t)
{
	if (!t)
		return;
	g_array_unref(t->cols);
	g_array_unref(t->rows);
	g_ptr_array_unref(t->lead);
	g_free(t);
}

void vt_table_add_column(VtTable *t, const char *header, guint width, gboolean right, guint gap)
{
	Column c = { g_strdup(header), width, right, gap };

	g_return_if_fail(t->rows->len == 0);
	g_array_append_val(t->cols, c);
}

void vt_table_add_row(VtTable *t)
{
	Row r = { g_ptr_array_new_with_free_func(g_free), g_ptr_array_new_with_free_func(g_free) };

	g_array_append_val(t->rows, r);
}

void vt_table_cell(VtTable *t, const char *fmt, ...)
{
	va_list ap;
	Row *r;

	g_return_if_fail(t->rows->len > 0);
	r = &g_array_index(t->rows, Row, t->rows->len - 1);
	g_return_if_fail(r->cells->len < t->cols->len);
	va_start(ap, fmt);
	g_ptr_array_add(r->cells, g_strdup_vprintf(fmt, ap));
	va_end(ap);
}

void vt_table_note(VtTable *t, const char *fmt, ...)
{
	va_list ap;
	GPtrArray *to = t->rows->len ? g_array_index(t->rows, Row, t->rows->len - 1).notes : t->lead;

	va_start(ap, fmt);
	g_ptr_array_add(to, g_strdup_vprintf(fmt, ap));
	va_end(ap);
}

/* Display width: characters of valid UTF-8, else bytes. */
static guint text_width(const char *s)
{
	return g_utf8_validate(s, -1, NULL) ? (guint)g_utf8_strlen(s, -1) : (guint)strlen(s);
}

static void print_line(const VtTable *t, FILE *f, const guint *w, const char *const *cells, guint n)
{
	for (guint i = 0; i < n; i++) {
		const Column *c = &g_array_index(t->cols, Column, i);
		const char *s = cells[i] ? cells[i] : "";
		guint pad = w[i] > text_width(s) ? w[i] - text_width(s) : 0;

		if (i)
			fprintf(f, "%*s", (int)c->gap, "");
		if (c->right)
			fprintf(f, "%*s%s", (int)pad, "", s);
		else if (i + 1 < n)
			fprintf(f, "%s%*s", s, (int)pad, "");
		else
			fputs(s, f);
	}
	fputc('\n', f);
}

void vt_table_print(const VtTable *t, FILE *f, gboolean header)
{
	guint n = t->cols->len;
	g_autofree guint *w = g_new0(guint, n ? n : 1);
	g_autofree const char **hdr = g_new0(const char *, n ? n : 1);

	for (guint i = 0; i < n; i++) {
		const Column *c = &g_array_index(t->cols, Column, i);

		hdr[i] = c->header;
		w[i] = MAX(c->width, header ? text_width(c->header) : 0);
	}
	for (guint r = 0; r < t->rows->len; r++) {
		const Row *row = &g_array_index(t->rows, Row, r);

		for (guint i = 0; i < row->cells->len; i++)
			w[i] = MAX(w[i], text_width(row->cells->pdata[i]));
	}
	for (guint i = 0; i < t->lead->len; i++)
		fprintf(f, "%s\n", (char *)t->lead->pdata[i]);
	if (header)
		print_line(t, f, w, hdr, n);
	for (guint r = 0; r < t->rows->len; r++) {
		const Row *row = &g_array_index(t->rows, Row, r);

		print_line(t, f, w, (const char *const *)row->cells->pdata, row->cells->len);
		for (guint i = 0; i < row->notes->len; i++)
			fprintf(f, "%s\n", (char *)row->notes->pdata[i]);
	}
}
