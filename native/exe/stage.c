/* Placeholder for the in-sandbox launch stage. */
int main(void) { return 125; }
