#!/bin/bash
printf 'hello, harbor\n' > /app/greeting.txt
