#!/bin/bash
python3 /tests/check.py /app/sum.txt "100"
